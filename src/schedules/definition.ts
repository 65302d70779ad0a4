/**
 * @module schedules/definition
 * Checks what `engine.schedules.create` (or a workflow's `schedule` option) was given and turns it
 * into a stored definition; turns a stored row back into what the API shows.
 */
import { InvalidArgumentError } from '../errors.ts';
import { toMs } from '../duration.ts';
import { decodeJson, encodeJson } from '../serialize.ts';
import { SCHEDULE_ID } from '../schedule-key.ts';
import type { ScheduleDefinition, ScheduleOverlap, ScheduleRow } from '../store.ts';
import type { ScheduleInfo, ScheduleOptions, WorkflowSchedule } from '../api/schedules.ts';
import { cronTicks } from './cron.ts';

const KNOWN = ['id', 'workflow', 'cron', 'timezone', 'input', 'overlap', 'catchup', 'paused'] as const;
const OVERLAPS: readonly ScheduleOverlap[] = ['skip', 'buffer', 'allow', 'cancel'];
const DEFAULT_CATCHUP_MS = 3_600_000;

/** The definition to store, or INVALID_ARGUMENT naming the option that is wrong. */
export function scheduleDefinition(o: ScheduleOptions, source: ScheduleDefinition['source'], where = 'engine.schedules.create'): ScheduleDefinition {
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError(`${where}: pass an object { id, workflow, cron, … }.`);
  const unknown = Object.keys(o).filter((k) => !(KNOWN as readonly string[]).includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${where}: unknown option ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${KNOWN.join(', ')}).`);
  if (typeof o.id !== 'string' || !SCHEDULE_ID.test(o.id)) {
    throw new InvalidArgumentError(`${where}: id ${JSON.stringify(o.id)} is not valid: use 1-100 letters, digits, ".", "_" or "-", starting with a letter or digit.`);
  }
  const at = `${where}("${o.id}")`;
  const workflow = typeof o.workflow === 'string' ? o.workflow : (o.workflow as { name?: unknown } | undefined)?.name;
  if (typeof workflow !== 'string' || !workflow) throw new InvalidArgumentError(`${at}: workflow must be a workflow or its name.`);
  cronTicks(o.cron, o.timezone, at);
  const overlap = o.overlap ?? 'skip';
  if (!OVERLAPS.includes(overlap)) throw new InvalidArgumentError(`${at}: overlap must be one of ${OVERLAPS.map((x) => `'${x}'`).join(', ')}, got ${JSON.stringify(overlap)}.`);
  const catchupMs = o.catchup === false ? 0 : o.catchup === undefined ? DEFAULT_CATCHUP_MS : toMs(o.catchup, `${at}: catchup`);
  if (o.paused !== undefined && typeof o.paused !== 'boolean') throw new InvalidArgumentError(`${at}: paused must be true or false.`);
  return {
    id: o.id,
    workflow,
    cron: o.cron,
    timezone: o.timezone ?? null,
    input: o.input === undefined ? null : encodeJson(o.input, `The input of schedule "${o.id}"`),
    overlap,
    catchupMs,
    source,
  };
}

/** The first tick of a schedule created or resumed at `now`. */
export function firstTick(d: Pick<ScheduleDefinition, 'id' | 'cron' | 'timezone'>, now: number): number | null {
  return cronTicks(d.cron, d.timezone, `schedule "${d.id}"`).next(now);
}

/** Whether two definitions are the same schedule (a create that repeats one changes nothing). */
export function sameDefinition(a: ScheduleDefinition, b: ScheduleRow): boolean {
  return a.workflow === b.workflow && a.cron === b.cron && a.timezone === b.timezone && a.input === b.input && a.overlap === b.overlap && a.catchupMs === b.catchupMs;
}

export function scheduleInfo(r: ScheduleRow): ScheduleInfo {
  return {
    id: r.id,
    workflow: r.workflow,
    cron: r.cron,
    timezone: r.timezone ?? 'UTC',
    input: r.input === null ? null : decodeJson(r.input),
    overlap: r.overlap,
    catchupMs: r.catchupMs,
    paused: r.paused,
    nextRunAt: r.paused ? null : r.nextAt,
    lastRunAt: r.lastAt,
    lastTaskId: r.lastTaskId,
    bufferedAt: r.bufferedAt,
    skipped: r.skipped,
    source: r.source,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  };
}

/** The definition of the schedule a workflow declares (INVALID_ARGUMENT naming the option if it is wrong). */
export function declaredSchedule(workflow: string, s: WorkflowSchedule): ScheduleDefinition & { paused: boolean } {
  if (typeof s !== 'object' || s === null) throw new InvalidArgumentError(`workflow("${workflow}"): schedule must be an object { cron, timezone?, input?, overlap?, catchup? }.`);
  if ('workflow' in s) throw new InvalidArgumentError(`workflow("${workflow}"): schedule takes no "workflow" (it is the workflow it is declared with).`);
  const def = scheduleDefinition({ ...s, id: s.id ?? workflow, workflow }, 'workflow', `workflow("${workflow}"): schedule`);
  return { ...def, paused: s.paused === true };
}
