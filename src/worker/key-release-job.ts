/**
 * @module worker/key-release-job
 * Internal: not part of the public API (the package exports only its index modules).
 * The release pass of tasks held behind their concurrency key (store/key-queues.ts), run by every
 * worker that serves a workflow with a limit per key. The store releases held tasks inside the
 * write that opens room in their key; this pass bounds how long a task can stay held when that
 * write ran beside the task's start and did not see it: at most {@link KEY_RELEASE_MS}.
 */
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import type { PeriodicScheduler } from './periodic.ts';

/** How often a worker runs the release pass. */
export const KEY_RELEASE_MS = 5000;

/** Whether a workflow limits its tasks per key (`concurrency: { key, limit }`). */
const limitsPerKey = (w: Workflow): boolean => typeof w.options.concurrency === 'object' && w.options.concurrency !== null;

export function keyReleaseJob(scheduler: PeriodicScheduler, host: { store: Store; clock: Clock; workflows: ReadonlyMap<string, Workflow> }): void {
  if (![...host.workflows.values()].some(limitsPerKey)) return;
  scheduler.add({
    name: 'releasing tasks held behind their keys',
    periodMs: KEY_RELEASE_MS,
    jitterMs: 1000,
    run: async () => {
      await host.store.releaseHeld(host.clock.now());
    },
  });
}
