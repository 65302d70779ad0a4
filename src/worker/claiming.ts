/**
 * @module worker/claiming
 * Internal: not part of the public API (the package exports only its index modules).
 * The parts of a worker's claim loop that do not depend on its state: what a claim asks the
 * store for (the lifecycle's claim and reclaim edges, the workflows' versions and caps), and the
 * idle wait between claims (until the next poll, the next due task, or a wake-up).
 */
import type { Clock } from '../clock.ts';
import { sourcesOf, transition } from '../lifecycle.ts';
import type { ClaimRequest, Store } from '../store.ts';
import type { Workflow } from '../workflow.ts';

/** The fixed part of every claim of a worker serving `workflows`. */
export function claimPlan(workflows: ReadonlyMap<string, Workflow>): Pick<ClaimRequest, 'workflows' | 'versions' | 'claim' | 'reclaim' | 'concurrency'> {
  const reclaimFrom = sourcesOf('reclaim');
  const concurrency: Record<string, number> = {};
  const versions: Record<string, string[]> = {};
  for (const wf of workflows.values()) {
    if (typeof wf.options.concurrency === 'number') concurrency[wf.name] = wf.options.concurrency;
    versions[wf.name] = [wf.version, ...(wf.options.compatibleVersions ?? []).map(String)];
  }
  return {
    workflows: [...workflows.keys()],
    versions,
    claim: { from: sourcesOf('claim'), to: transition({ status: 'pending' }, 'claim').to },
    reclaim: { from: reclaimFrom, to: Object.fromEntries(reclaimFrom.map((s) => [s, transition({ status: s }, 'reclaim').to])) },
    concurrency,
  };
}

/**
 * Waits until the next poll (`pollMs`, real time), until `nextDue` on `clock` if given, or until
 * the function handed to `onWake` is called, whichever comes first.
 */
export function idle(pollMs: number, nextDue: number | null, clock: Clock, onWake: (wake: () => void) => void): Promise<void> {
  return new Promise<void>((resolve) => {
    // (An AbortController only when there is a due time to wait for, aborted without a
    // DOMException: the claim loop turns once per finished run when the worker is busy.)
    const until = nextDue === null ? null : new AbortController();
    const timer = setTimeout(done, pollMs);
    function done(): void {
      clearTimeout(timer);
      until?.abort(null);
      resolve();
    }
    if (until && nextDue !== null) clock.sleep(Math.max(1, nextDue - clock.now()), until.signal).then(done, () => undefined);
    onWake(() => setImmediate(done));
  });
}

/** When the next task of `workflows` falls due after `after` (null: none, or the store did not say). */
export async function nextDueOf(store: Store, workflows: string[], after: number): Promise<number | null> {
  try {
    return await store.nextRunAt({ workflows, after });
  } catch {
    return null; // the poll still comes; the claim reports what is wrong with the store
  }
}
