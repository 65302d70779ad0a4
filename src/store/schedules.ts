/**
 * @module store/schedules
 * Schedules: a cron definition per row and where its ticks stand. The store keeps the rows and
 * moves a schedule's next tick with a compare-and-set; what a tick starts is decided above it.
 */

export type ScheduleOverlap = 'skip' | 'buffer' | 'allow' | 'cancel';

export interface ScheduleRow {
  id: string;
  workflow: string;
  cron: string;
  timezone: string | null;
  /** The input of every tick's task, as JSON text (null: no input). */
  input: string | null;
  overlap: ScheduleOverlap;
  catchupMs: number;
  paused: boolean;
  /** The next tick to fire (ms); null when the cron has no later tick. */
  nextAt: number | null;
  /** The last tick fired or skipped. */
  lastAt: number | null;
  /** The task the last fired tick started. */
  lastTaskId: string | null;
  /** A tick held back (`overlap: 'buffer'`) until the last tick's task ends. */
  bufferedAt: number | null;
  /** Ticks skipped so far (missed past the catch-up window, or by `overlap: 'skip'`). */
  skipped: number;
  source: 'api' | 'workflow';
  createdAt: number;
  updatedAt: number;
}

/** What defines a schedule (the rest of its row is its state). */
export type ScheduleDefinition = Pick<ScheduleRow, 'id' | 'workflow' | 'cron' | 'timezone' | 'input' | 'overlap' | 'catchupMs' | 'source'>;

/**
 * A tick handled: `nextAt` moves from `from` (the value read) to `nextAt`, refused (false) if
 * another process moved it first. The other fields are set when given.
 */
export interface ScheduleAdvance {
  id: string;
  from: number;
  nextAt: number | null;
  lastAt?: number;
  lastTaskId?: string;
  /** A tick to hold back (a number), or none any more (null). */
  bufferedAt?: number | null;
  /** How many ticks this advance skipped. */
  skipped?: number;
  at: number;
}

export interface ScheduleStore {
  /**
   * Creates a schedule, or replaces the definition of an existing one (its state is kept, and its
   * next tick set to `nextAt`). `created`: whether it is new.
   */
  putSchedule(def: ScheduleDefinition, nextAt: number | null, at: number): Promise<{ row: ScheduleRow; created: boolean }>;
  getSchedule(id: string): Promise<ScheduleRow | null>;
  /** Schedules in id order, after `after`. */
  listSchedules(query: { after?: string; limit: number; workflow?: string }): Promise<ScheduleRow[]>;
  /** Schedules not paused whose next tick is due at `now`, or that hold a buffered tick; earliest first. */
  dueSchedules(now: number, limit: number): Promise<ScheduleRow[]>;
  advanceSchedule(a: ScheduleAdvance): Promise<boolean>;
  /** The earliest next tick of the schedules not paused (null: none), for a scanner to wake at. */
  nextScheduleAt(): Promise<number | null>;
  /** Pauses or resumes; on resume `nextAt` is the next tick from then. Null if there is no such schedule. */
  setSchedulePaused(id: string, paused: boolean, nextAt: number | null, at: number): Promise<ScheduleRow | null>;
  deleteSchedule(id: string): Promise<boolean>;
}
