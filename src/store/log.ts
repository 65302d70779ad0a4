/**
 * @module store/log
 * The event log: its entries, the pages of a cross-task read, and the capability of reading and appending it.
 */

/** Who caused an entry of the event log. */
export type ActorKind = 'user' | 'worker' | 'system';

/**
 * One entry of a task's append-only event log, as stored. `seq` numbers a task's entries 1, 2, 3…
 * without gaps, in commit order; `data` is JSON text the store never parses (except where it
 * builds the entries of its own operations, see {@link Store}).
 */
export interface EventRow {
  taskId: string;
  seq: number;
  at: number;
  type: string;
  actorKind: ActorKind;
  actorId: string;
  data: string | null;
}

/** An entry for the store to append; it gets the task's next `seq` in the same transaction. */
export interface NewEvent {
  type: string;
  actorKind: ActorKind;
  actorId: string;
  /** JSON text. */
  data: string | null;
  /**
   * The journal position whose row carries this entry (see {@link journalCarries}): the store
   * stores the entry's seq on that row (`log_seq`) instead of writing an entry of its own.
   */
  carriedBy?: number;
}

/** Seqs of one task's log strictly between `after` and `before` (see `Store.getEventRanges`). */
export interface EventRange {
  taskId: string;
  after: number;
  before: number;
}

/** A read of the log across all tasks, resumable from `cursor` (opaque; `null` from the start). */
export interface LogPage {
  /**
   * The entries stored on their own (not step results, which journal rows carry, nor entries moved
   * from such rows: see `RESULT_ENTRY_TYPES` in log-entries.ts), each with the cursor that resumes right after
   * it and `prevSeq`: the highest seq below its own among the task's entries stored on their own
   * that come before it in this log's order (0: none). The seqs in between are the step results
   * that came before it and, where the log's order is not the task's (PostgreSQL: see `readLog`
   * there), the task's entries that come after it in the log although their seqs are lower.
   */
  events: Array<EventRow & { cursor: string; prevSeq: number }>;
  /** Pass back as `after` to read what follows (the last event's cursor, or `after` if none). */
  cursor: string | null;
  /**
   * With a `mark` (see `Store.logMark`): entries committed before the mark was taken may not be
   * readable yet, because transactions that were writing then are still running. Read again
   * later (after them) to reach the mark; `false` once everything up to it was readable.
   */
  behind: boolean;
}

/**
 * Log entries about a task that change nothing else (a dwell alert): appended only while the task's
 * `version` is still `version`, which the write bumps (so two scanners cannot both append them).
 */
export interface LogAppend {
  taskId: string;
  version: number;
  at: number;
  log: readonly NewEvent[];
}

/** Where a task's log and stream stand: its last log seq, and its last stream frame's id (0: none). */
export interface LogPosition {
  taskId: string;
  seq: number;
  frame: number;
}

/** A task's log and the log of every task. */
export interface LogStore {
  /**
   * A task's log entries with `seq > after` (default 0), oldest first, at most `limit` (default
   * all): its entries of their own merged with those its journal rows carry.
   */
  getEvents(taskId: string, after?: number, limit?: number): Promise<EventRow[]>;
  /**
   * Where the logs and streams of these tasks stand (a task not found is left out): for readers
   * that follow a task, in a process that the store does not tell of entries committed elsewhere
   * (`log-watch.ts`). Stores that tell every commit (SQLite's `subscribe`) leave it out.
   */
  logPositions?(taskIds: readonly string[]): Promise<LogPosition[]>;
  /**
   * A task's log entries of these types, oldest first: types that journal rows never carry (model
   * usage, alerts), read without the rest of the log.
   */
  getEventsOfType(taskId: string, types: readonly string[]): Promise<EventRow[]>;
  /**
   * For each range, its task's log entries with `after < seq < before`, oldest first (as
   * `getEvents` reads them), all in one read: the cross-task reader fills in a page's step results
   * with it.
   */
  getEventRanges(ranges: readonly EventRange[]): Promise<EventRow[][]>;
  /**
   * Entries of every task committed after `after` (a cursor from an earlier page; `null`: from the
   * start), in an order that never places an entry before one already returned: a reader that
   * resumes from a cursor misses nothing, even under concurrent writers. Step results carried by
   * their journal rows (see `journalCarries`) are not in it: they are read per task.
   * With `mark`, the page says whether the log is readable up to it yet (`LogPage.behind`).
   */
  readLog(after: string | null, limit: number, mark?: string | null): Promise<LogPage>;
  /**
   * The end of the log as of now, for `readLog`'s `mark`: every entry committed before this call
   * is readable once a page is no longer `behind` it. `null` where every committed entry is
   * readable at once (SQLite: one writer at a time, rows in commit order).
   */
  logMark(): Promise<string | null>;
  /** Appends entries to a task's log (see {@link LogAppend}); false if its version moved on. */
  appendEvents(write: LogAppend): Promise<boolean>;
  /** Appends entries to a task's log in one transaction; `false` if there is no such task. */
  appendTaskEvents?(taskId: string, at: number, entries: readonly NewEvent[]): Promise<boolean>;
}
