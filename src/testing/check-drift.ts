/**
 * @module testing/check-drift
 * `checkDrift(engine, filter)`: the tasks of a filter whose recorded model calls the current code
 * would make with another request (prompt, model, tools or settings changed), found by replaying
 * each (`checkReplay`: a scratch copy, no model call, no side effect). Run it after a prompt fix
 * to find the runs to re-run: `engine.retry(id, { fromStep: firstDrift })`.
 */
import type { Engine, ListOptions } from '../index.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkReplay, isReplayCheckError, type DriftedCall } from './check-replay.ts';

export interface TaskDrift {
  taskId: string;
  /** The first drifted call's step id: what to re-run from. */
  firstDrift: string;
  drift: DriftedCall[];
}

export interface DriftReport {
  /** Tasks with at least one drifted call, newest first. */
  drifted: TaskDrift[];
  /** Tasks replayed. */
  checked: number;
  /** Tasks the current code does not replay at all (a step added or removed: `checkReplay` says how), with the reason. */
  unreplayable: Array<{ taskId: string; reason: string }>;
}

/** At most this many tasks are replayed by one call (a replay costs a scratch database each). */
const MAX_TASKS = 1000;

export async function checkDrift(engine: Engine, filter: Omit<ListOptions, 'limit' | 'cursor'> & { limit?: number } = {}): Promise<DriftReport> {
  const { limit = 100, ...search } = filter;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_TASKS) throw new InvalidArgumentError(`checkDrift: limit must be a whole number from 1 to ${MAX_TASKS}, got ${String(limit)}.`);
  const report: DriftReport = { drifted: [], checked: 0, unreplayable: [] };
  let cursor: string | undefined;
  while (report.checked < limit) {
    const page = await engine.list({ ...search, limit: Math.min(100, limit - report.checked), ...(cursor ? { cursor } : {}) });
    for (const t of page.tasks) {
      report.checked++;
      // Only tasks whose workflow this engine knows can be replayed against its code.
      if (!engine.workflows.has(t.workflow)) continue;
      try {
        const { drift } = await checkReplay(engine, t.id);
        if (drift.length) report.drifted.push({ taskId: t.id, firstDrift: (drift[0] as DriftedCall).step, drift });
      } catch (e) {
        if (!isReplayCheckError(e)) throw e;
        report.unreplayable.push({ taskId: t.id, reason: e.message });
      }
    }
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  return report;
}
