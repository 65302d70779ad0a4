/**
 * @module postgres/watchdog
 * Internal: not part of the public API.
 * Finds connections whose server side is gone while the client side still looks open: after a
 * PostgreSQL restart or failover behind a NAT, a load balancer or a proxy, the old sockets often
 * stop forwarding without a reset (half-open). A statement sent on such a connection is never
 * answered, so it would wait for the client-side deadline (the statement timeout plus a margin,
 * 32 s by default) while the database is already back; and so would every later statement that
 * the pool hands that connection, and the LISTEN connection's ping.
 *
 * When a statement has been unanswered for {@link SUSPECT_TICKS} ticks, the watchdog asks the
 * database on a fresh connection which backends still exist, and destroys every known connection
 * (pooled, kept, listening) whose backend is gone: its statement fails at once as a connection
 * error, the pool drops it and the caller retries on a new one. A slow statement whose backend
 * still runs is left alone (and asked about again after twice as long). Until the fresh connection succeeds (the database is still down),
 * nothing is destroyed and the next tick asks again. Ticks are real time, like every network
 * deadline (see deadlines.ts), not the engine's clock.
 */
import type { Client, ClientBase } from 'pg';
import { destroySocket, endClient } from './deadlines.ts';

/** How often connections are looked at. */
const TICK_MS = 500;
/** A statement unanswered for this many ticks (1 to 1.5 s) makes the watchdog check backends. */
const SUSPECT_TICKS = 3;

interface Seen {
  query: unknown;
  ticks: number;
  /** The tick count at which it is (again) suspect: doubled each time its backend is found alive. */
  suspectAt: number;
}

export class ConnectionWatchdog {
  readonly #connections: () => Iterable<ClientBase>;
  readonly #probe: () => Client;
  readonly #seen = new WeakMap<ClientBase, Seen>();
  #timer: NodeJS.Timeout | null = null;
  #probing = false;

  /** `connections`: every connection to watch now; `probe`: a new, unconnected client to ask with. */
  constructor(connections: () => Iterable<ClientBase>, probe: () => Client) {
    this.#connections = connections;
    this.#probe = probe;
  }

  start(): void {
    if (this.#timer) return;
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  #tick(): void {
    let suspect = false;
    for (const client of this.#connections()) {
      const query = activeQueryOf(client);
      const seen = this.#seen.get(client);
      if (!query) this.#seen.delete(client);
      else if (seen?.query !== query) this.#seen.set(client, { query, ticks: 1, suspectAt: SUSPECT_TICKS });
      else if (++seen.ticks >= seen.suspectAt) suspect = true;
    }
    if (suspect && !this.#probing) {
      this.#probing = true;
      void this.#destroyOrphans().finally(() => (this.#probing = false));
    }
  }

  /** Destroys every watched connection whose backend no longer exists (if the database answers). */
  async #destroyOrphans(): Promise<void> {
    const clients = [...this.#connections()];
    const pids = clients.map(pidOf).filter((p): p is number => p !== undefined);
    if (!pids.length) return;
    const probe = this.#probe();
    probe.on('error', () => undefined);
    let alive: Set<number>;
    try {
      await probe.connect();
      const result = await probe.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])', [pids]);
      alive = new Set(result.rows.map((r) => Number(r.pid)));
    } catch {
      return; // the database is not back yet: the next tick asks again
    } finally {
      await endClient(probe);
    }
    for (const client of clients) {
      const pid = pidOf(client);
      if (pid !== undefined && !alive.has(pid)) destroySocket(client);
      else {
        // A slow statement on a live backend: asked about again later and later, not every tick.
        const seen = this.#seen.get(client);
        if (seen && seen.ticks >= seen.suspectAt) seen.suspectAt = seen.ticks * 2;
      }
    }
  }
}

/** The statement a connection waits on, if any (pg 8 keeps it in `_activeQuery`). */
function activeQueryOf(client: ClientBase): unknown {
  return (client as unknown as { _activeQuery?: unknown })._activeQuery ?? null;
}

function pidOf(client: ClientBase): number | undefined {
  const pid = (client as unknown as { processID?: unknown }).processID;
  return typeof pid === 'number' && pid > 0 ? pid : undefined;
}
