/**
 * @module api/schedules
 * The public shapes of schedules: what `engine.schedules.create` takes and what its other
 * commands return.
 */
import type { Duration } from '../duration.ts';
import type { ScheduleOverlap } from '../store.ts';

export type { ScheduleOverlap } from '../store.ts';

export interface ScheduleOptions {
  /** The schedule's id: a letter or digit, then letters, digits, `.`, `_`, `-` (at most 100). */
  id: string;
  /** The workflow each tick starts (its name, or the workflow itself). */
  workflow: string | { readonly name: string };
  /** A cron expression: five fields (minute hour day month weekday), or six with seconds first. */
  cron: string;
  /** The IANA time zone the cron is read in (daylight saving handled). @defaultValue 'UTC' */
  timezone?: string;
  /** The input of every tick's task (JSON). */
  input?: unknown;
  /**
   * What a tick does while the task of the last tick still runs: `'skip'` it (counted in
   * `skipped`), `'buffer'` it (one tick waits and starts when that task ends; later ones are
   * skipped), `'allow'` both to run, or `'cancel'` the running one and start. @defaultValue 'skip'
   */
  overlap?: ScheduleOverlap;
  /**
   * How late a tick missed while no worker ran (a deploy, an outage) may still start; older missed
   * ticks are skipped. `false`: only ticks on time. @defaultValue '1h'
   */
  catchup?: Duration | false;
  /** Create it paused. @defaultValue false */
  paused?: boolean;
}

export interface ScheduleInfo {
  id: string;
  workflow: string;
  cron: string;
  timezone: string;
  input: unknown;
  overlap: ScheduleOverlap;
  /** How late a missed tick may still start (ms). */
  catchupMs: number;
  paused: boolean;
  /** When the next tick is due (ms since the epoch); null if the cron has no later tick. */
  nextRunAt: number | null;
  /** The last tick fired or skipped, and the task the last fired tick started. */
  lastRunAt: number | null;
  lastTaskId: string | null;
  /** A tick held back by `overlap: 'buffer'`. */
  bufferedAt: number | null;
  /** Ticks skipped (missed beyond the catch-up window, or by the overlap policy). */
  skipped: number;
  /** `'api'`: created by a call; `'workflow'`: declared with a workflow's `schedule` option. */
  source: 'api' | 'workflow';
  createdAt: number;
  updatedAt: number;
}

/** A schedule declared with its workflow (`workflow(name, fn, { schedule })`): its id defaults to the workflow's name. */
export type WorkflowSchedule = Omit<ScheduleOptions, 'workflow' | 'id'> & { id?: string };
