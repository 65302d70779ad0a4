/**
 * @module worker/presence
 * Internal: not part of the public API.
 * A running worker's presence in the store: which workflow versions it claims tasks of (each
 * workflow's own version and its `compatibleVersions`), written when it starts, refreshed every
 * {@link PRESENCE_REFRESH_MS} while it runs, removed when it stops. `explain` counts a version as
 * served while some worker of it was seen within {@link PRESENCE_LIVE_MS}, so a task whose version
 * no live worker serves is named as such (a dead worker drops out after that long).
 *
 * Presence is about processes being alive, so it is on real time (the system clock), not on the
 * engine's injectable clock: a test that advances a ManualClock by an hour does not make its
 * running workers look dead.
 */
import { systemClock } from '../clock.ts';
import type { Store, WorkerPresence } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import type { PeriodicJob } from './periodic.ts';

export const PRESENCE_REFRESH_MS = 30_000;
/** Three refreshes missed: the worker is taken for gone. */
export const PRESENCE_LIVE_MS = 3 * PRESENCE_REFRESH_MS;
/** Rows of workers not seen for a day are deleted by any worker's refresh. */
const PRESENCE_FORGET_MS = 24 * 3_600_000;

/** The versions `workflows` lets a worker claim, as presence rows. */
export function servedBy(workerId: string, workflows: Iterable<Workflow>): WorkerPresence {
  const served: Array<{ name: string; version: string }> = [];
  for (const w of workflows) {
    for (const version of new Set([w.version, ...(w.options.compatibleVersions ?? []).map(String)])) served.push({ name: w.name, version });
  }
  return { workerId, served, at: systemClock.now() };
}

/** Writes (or refreshes) the worker's presence now. */
export async function recordPresence(store: Store, workerId: string, workflows: Iterable<Workflow>): Promise<void> {
  const presence = servedBy(workerId, workflows);
  await store.recordPresence(presence, presence.at - PRESENCE_FORGET_MS);
}

/** The background job that refreshes the presence while the worker runs. */
export function presenceJob(store: Store, workerId: string, workflows: ReadonlyMap<string, Workflow>): PeriodicJob {
  return {
    name: 'refreshing this worker’s presence',
    periodMs: PRESENCE_REFRESH_MS,
    run: () => recordPresence(store, workerId, workflows.values()),
  };
}

/** The versions of `workflow` some live worker serves now. */
export function liveVersions(store: Store, workflow: string): Promise<string[]> {
  return store.servedVersions(workflow, systemClock.now() - PRESENCE_LIVE_MS);
}
