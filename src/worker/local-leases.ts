/**
 * @module worker/local-leases
 * Internal: not part of the public API (the package exports only its index modules).
 * Default worker ids name their host and process, so that a worker starting on a host can end at
 * once the leases of a dead worker process of the same host instead of waiting for their expiry.
 */
import { hostname } from 'node:os';
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';

/**
 * The default worker id, `<host>-<pid>-<random>`: it names the host and process that hold a lease,
 * so that a worker starting on the same host can tell a dead owner's leases (see `start()`).
 */
export function localWorkerId(pid: number, suffix: string): string {
  return `${hostname()}-${pid}-${suffix}`;
}

/** The pid of a default worker id of this host, or null (another host, or a custom id). */
function localPid(owner: string): number | null {
  const host = hostname();
  if (!owner.startsWith(`${host}-`)) return null;
  const m = /^(\d+)-[a-z0-9]+$/.exec(owner.slice(host.length + 1));
  return m ? Number(m[1]) : null;
}

/** Whether process `pid` of this host is alive (a process we may not signal is alive). */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === 'EPERM';
  }
}

/**
 * Leases held by a worker process of this host that is no longer alive (a crash, a SIGKILL) end
 * now instead of at their expiry, so a worker restarted on the same host resumes their tasks at
 * once. Only default worker ids (`<host>-<pid>-…`) of this host are judged; a pid that exists is
 * taken as alive, so a reused pid only means waiting for the lease.
 */
export async function endDeadLocalLeases(store: Store, clock: Clock): Promise<void> {
  const now = clock.now();
  for (const owner of await store.leaseOwners(now)) {
    const pid = localPid(owner);
    if (pid === null || pid === process.pid || isAlive(pid)) continue;
    await store.endLeasesOf(owner, now);
  }
}
