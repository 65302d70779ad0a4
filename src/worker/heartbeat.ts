/**
 * @module worker/heartbeat
 * Internal: not part of the public API (the package exports only its index modules).
 * A worker's leases: the heartbeat renews the lease of every task it runs (on its own timer, so a
 * ten-minute LLM call keeps its lease) and brings back cancel and pause requests made by other
 * processes. When renewals fail, a run whose lease may have expired stops itself before another
 * worker's run collides with it (self-fencing). Beside the renewals, every heartbeat ends the
 * cancelling tasks that no worker took over (see {@link abandonCancelling}).
 */
import type { Clock } from '../clock.ts';
import { coerceError } from '../errors.ts';
import { sourcesOf, transition } from '../lifecycle.ts';
import type { TaskRun } from '../run/task-run.ts';
import type { Store } from '../store.ts';
import { effectColumns } from '../transitions.ts';

export interface HeartbeatHost {
  workerId: string;
  store: Store;
  clock: Clock;
  leaseMs: number;
  heartbeatMs: number;
  /** The runs of the worker, by task id. */
  runs: ReadonlyMap<string, TaskRun>;
  onError: (error: Error, during: string) => void;
}

export class Heartbeat {
  readonly #host: HeartbeatHost;
  /** Last successful heartbeat (or claim) time per task, for self-fencing when heartbeats fail. */
  readonly #renewedAt = new Map<string, number>();
  #timer: NodeJS.Timeout | null = null;
  #beating: Promise<void> | null = null;
  /** The fallback for cancelling tasks nobody takes over, while it runs. */
  #abandoning: Promise<unknown> | null = null;
  #stopped = false;

  constructor(host: HeartbeatHost) {
    this.#host = host;
  }

  start(): void {
    this.#timer = setInterval(() => void this.#beat(), this.#host.heartbeatMs);
  }

  /** The lease of `taskId` was taken (or renewed) at `at`. */
  renewed(taskId: string, at: number): void {
    this.#renewedAt.set(taskId, at);
  }

  forget(taskId: string): void {
    this.#renewedAt.delete(taskId);
  }

  /**
   * Until when a task's lease is surely still ours: its last renewal plus the lease, less two
   * heartbeats of margin (clocks of workers drift, and another worker needs a poll to notice).
   */
  safeUntil(taskId: string): number {
    return (this.#renewedAt.get(taskId) ?? 0) + this.#host.leaseMs - 2 * this.#host.heartbeatMs;
  }

  /** Renews the leases of every running task; learns of cancels and pauses from other processes. */
  async #beat(): Promise<void> {
    const { clock, runs } = this.#host;
    // Self-fencing, whatever the state of the heartbeat itself (it may hang on a dead network).
    const now = clock.now();
    for (const run of runs.values()) if (now >= this.safeUntil(run.taskId)) run.loseLease();
    if (this.#beating) return;
    this.#beating = this.#renew().catch((e: unknown) => this.#host.onError(coerceError(e), 'heartbeat'));
    await this.#beating;
    this.#beating = null;
    // Apart from the renewals, so that it never delays them.
    if (this.#stopped) return;
    this.#abandoning ??= abandonCancelling(this.#host.store, clock.now(), this.#host.leaseMs)
      .catch((e: unknown) => this.#host.onError(coerceError(e), 'ending abandoned cancelling tasks'))
      .finally(() => (this.#abandoning = null));
  }

  async #renew(): Promise<void> {
    const { store, clock, runs, workerId, leaseMs } = this.#host;
    const now = clock.now();
    // Each task with the epoch its lease is renewed at: a kept run resumed while the renewal was in
    // flight is the same object at a new epoch, and the answer about the old one is not about it.
    // Ids, not the runs: a run that ends meanwhile is not held until the answer comes.
    // A run that gave up its lease (self-fenced, above) is not renewed: it stays in `runs` until its
    // step returns, and renewing its lease would keep every other worker from taking the task over.
    const list: Array<{ taskId: string; epoch: number }> = [];
    for (const run of runs.values()) if (!run.leaseLost) list.push({ taskId: run.taskId, epoch: run.epoch });
    if (!list.length) return;
    const held = await store.heartbeat({ workerId, now, leaseMs, held: list });
    const byId = new Map(held.map((h) => [h.taskId, h]));
    for (const { taskId, epoch } of list) {
      const run = runs.get(taskId);
      // Finished, or claimed again (a new epoch), meanwhile.
      if (!run || run.epoch !== epoch) continue;
      const h = byId.get(run.taskId);
      if (!h) {
        // A run whose end is written (or being written, fenced by its epoch) has nothing left to
        // stop: a park that committed before this answer leaves the task unheld, and taking that
        // for a lost lease would cost the parked run its place among the kept ones.
        if (!run.ended) run.loseLease();
        continue;
      }
      this.#renewedAt.set(run.taskId, now);
      if (h.status === 'cancelling') run.cancel(h.cancelReason ?? undefined);
      else if (h.pauseRequested) run.requestPause();
      else run.withdrawPause();
    }
  }

  /** Stops the timer and waits for the heartbeat and fallback in flight. */
  async stop(): Promise<void> {
    this.abandon();
    await this.#beating;
    await this.#abandoning;
  }

  /** Stops the timer; nothing is waited for. */
  abandon(): void {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}

/**
 * The fallback for a cancelling task whose worker died and that no worker serving its workflow
 * and version takes over (none runs, as during a rolling deploy to an incompatible version, or
 * all are full): once its lease has been expired for a further `leaseMs` — time for such a
 * worker to reclaim it (a reclaim renews the lease, so the two cannot both happen) — it ends
 * `cancelled` (`abort`), and the entry says that its cleanup did not run and why. Any worker's
 * heartbeat does it, whatever workflows it serves.
 */
async function abandonCancelling(store: Store, now: number, leaseMs: number): Promise<void> {
  const abort = transition({ status: 'cancelling' }, 'abort');
  await store.expireLeases({
    now,
    event: 'abort',
    from: sourcesOf('abort'),
    to: abort.to,
    set: effectColumns(abort, now),
    expiredForMs: leaseMs,
    note: `its cleanup (onCancel handlers, compensations) did not run: no worker of workflow "{workflow}" version {version} took the task over within ${leaseMs} ms of its lease expiring`,
  });
}
