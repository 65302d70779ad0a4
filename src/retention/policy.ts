/**
 * @module retention/policy
 * How long finished tasks are kept (`new Engine({ retention })`, a workflow's `retention` option):
 * checked and turned into milliseconds here, and into the deletions a sweep makes. Pure: no store.
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { firstIdAt } from '../ids.ts';
import type { TaskSelection } from '../store.ts';

/** The statuses a task can be deleted in: those it never leaves on its own. */
export const DELETABLE_STATUSES = ['succeeded', 'failed', 'cancelled'] as const;
export type DeletableStatus = (typeof DELETABLE_STATUSES)[number];

/**
 * How long tasks are kept after they finished, per final status: a duration, or `null` to keep
 * them (the default for a status left out). A workflow's policy overrides the engine's per status.
 * @example { succeeded: '7d', cancelled: '7d', failed: '30d' }
 */
export type RetentionPolicy = Partial<Record<DeletableStatus, Duration | null>>;

/** A checked policy: milliseconds, or null (keep) per status given. */
export type RetentionMs = Partial<Record<DeletableStatus, number | null>>;

/** Checks a policy (at construction), naming `where` in the error. */
export function resolveRetention(policy: unknown, where: string): RetentionMs {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw new InvalidArgumentError(`${where}: retention must be { succeeded?, failed?, cancelled? }, each a duration such as '7d' or null to keep.`);
  }
  const out: RetentionMs = {};
  for (const [status, keep] of Object.entries(policy)) {
    if (!(DELETABLE_STATUSES as readonly string[]).includes(status)) {
      throw new InvalidArgumentError(`${where}: retention.${status} is not a final status (use succeeded, failed or cancelled).`);
    }
    out[status as DeletableStatus] = keep === null ? null : toMs(keep as Duration, `${where}: retention.${status}`);
  }
  return out;
}

/** Checks the statuses of a purge or delete: final ones only, at least one. */
export function deletableStatuses(statuses: unknown, what: string): DeletableStatus[] {
  const list = statuses === undefined ? [...DELETABLE_STATUSES] : Array.isArray(statuses) ? statuses : [statuses];
  if (!list.length) throw new InvalidArgumentError(`${what}: give at least one status (succeeded, failed, cancelled).`);
  for (const s of list) {
    if (!(DELETABLE_STATUSES as readonly unknown[]).includes(s)) {
      throw new InvalidArgumentError(`${what}: "${String(s)}" is not a status a task can be deleted in: only finished tasks are (succeeded, failed, cancelled).`);
    }
  }
  return [...new Set(list as DeletableStatus[])];
}

/**
 * The deletion of tasks finished at least `keepMs` ago (at `now - keepMs` or earlier), for
 * `statuses`: their ids are below the first id made a millisecond later, which bounds the scan to
 * tasks created by then.
 */
export function olderThan(now: number, keepMs: number, statuses: readonly DeletableStatus[], workflows?: readonly string[]): TaskSelection {
  const before = now - keepMs + 1;
  return { statuses, finishedBefore: before, idBefore: firstIdAt(before), ...(workflows ? { workflows } : {}) };
}

/**
 * What a retention sweep deletes now: for each workflow, the engine's policy overridden by the
 * workflow's own, per status; workflows that keep a status for the same time share one deletion.
 */
export function sweepDeletions(now: number, engine: RetentionMs, workflows: ReadonlyArray<{ name: string; retention?: RetentionMs }>): TaskSelection[] {
  const groups = new Map<string, { status: DeletableStatus; keepMs: number; names: string[] }>();
  for (const w of workflows) {
    for (const status of DELETABLE_STATUSES) {
      const keepMs = w.retention && status in w.retention ? w.retention[status] : engine[status];
      if (keepMs === null || keepMs === undefined) continue;
      const key = `${status}:${keepMs}`;
      const g = groups.get(key);
      if (g) g.names.push(w.name);
      else groups.set(key, { status, keepMs, names: [w.name] });
    }
  }
  return [...groups.values()].map((g) => olderThan(now, g.keepMs, [g.status], g.names.sort()));
}

export type { TasksDeletedEvent } from '../task-events/observed.ts';
