/**
 * @module event-stream
 * Internal: not part of the public API (the package exports only its index modules).
 * Reading the event log as it grows: `engine.events()` (one task, or every task) and the delivery
 * of this process's entries to observers' `onEvent`.
 *
 * A reader reads the log, hands out what it found, then waits for news before reading again. News
 * is a nudge on the local bus (this process committed entries of the task, or heard of a change
 * from another process through the store's notifications), or the poll interval running out: on
 * PostgreSQL, transitions that other processes announce (a task made runnable, cancelled, paused,
 * finished) arrive at once, and other entries (step checkpoints of a worker elsewhere) within one
 * poll; on SQLite, other processes' entries are found by polling. Nothing is missed either way:
 * the log, not the nudge, is what is read.
 */
import { InvalidArgumentError } from './errors.ts';
import { isFinished } from './lifecycle.ts';
import type { NewsBus } from './news.ts';
import { RESULT_ENTRY_TYPES } from './log-entries.ts';
import { followLog } from './log-watch.ts';
import type { EventRange, EventRow, Store } from './store.ts';
import { toStreamEvent, type StreamEvent } from './stream-frames.ts';
import { toTaskEvent, type TaskEvent } from './task-events.ts';

export interface EventsOptions {
  /**
   * Only this task's entries; without it, every task's in commit order, a task's step results
   * (carried by its journal rows) right before its next entry of its own.
   */
  taskId?: string;
  /**
   * Resume after this point: for one task, the last `seq` seen (0: from the start); for every task,
   * the `cursor` of the last page (see {@link EventsPage}) — `'now'` starts at the current end.
   * @defaultValue from the start
   */
  after?: number | string;
  /**
   * Keep waiting for new entries (true), or end at the current end of the log (false): after every
   * entry committed before the call. A reader of one task also ends once the task has succeeded or
   * been cancelled and its last entry was read. Across tasks on PostgreSQL, entries become readable
   * in order only once the transactions that were writing before them have ended, so `false` may
   * wait for those (a long transaction elsewhere on the server holds it back until it ends).
   * @defaultValue true
   */
  follow?: boolean;
  /** Ends the iteration (without an error). */
  signal?: AbortSignal;
  /** Longest wait between two reads of the log without news. @defaultValue 500 (100 with `streams`) */
  pollMs?: number;
  /**
   * With `taskId`: also the frames of the task's streaming steps (`stream:delta`, and `stream:reset`
   * when a retried attempt starts over; see {@link StreamEvent}), merged with the log entries in
   * time order. Frames have their own `seq`: resume with `after` (the last log entry's `seq`) and
   * `streamAfter` (the last frame's). Frames are kept until the task has ended (see `streamFrames`
   * of `new Engine()`); after that a stream's text is the step's result, in its `step:completed` entry.
   * @defaultValue false
   */
  streams?: boolean;
  /** With `streams`: resume after this frame `seq`. @defaultValue 0 (from the start) */
  streamAfter?: number;
}

/** How many entries one read asks for. */
const PAGE = 500;

/** Checks `streams` and `streamAfter` of `engine.events()` options. */
export function checkStreamOptions(options: EventsOptions): void {
  if (options.streams !== undefined && typeof options.streams !== 'boolean') throw new InvalidArgumentError('events({ streams }): streams is true or false.');
  if (options.streams && options.taskId === undefined) {
    throw new InvalidArgumentError('events({ streams: true }) needs a taskId: stream frames are read per task.');
  }
  if (options.streamAfter !== undefined) {
    if (!options.streams) throw new InvalidArgumentError('events({ streamAfter }) goes with streams: true.');
    if (typeof options.streamAfter !== 'number' || !Number.isInteger(options.streamAfter) || options.streamAfter < 0) {
      throw new InvalidArgumentError('events({ streamAfter }): the seq of the last stream frame seen, a whole number ≥ 0.');
    }
  }
}

/** Resolves on a nudge for `taskId` (or any task), after `ms`, or when `signal` aborts. */
export function waitForNews(bus: NewsBus, taskId: string | undefined, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const offs: Array<() => void> = [];
    const done = (): void => {
      clearTimeout(timer);
      for (const off of offs) off();
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const match = (e: { taskId: string }): void => {
      if (taskId === undefined || e.taskId === taskId || e.taskId === '*') done();
    };
    offs.push(
      bus.on('log:appended', match),
      bus.on('task:ready', match),
      bus.on('task:cancel', match),
      bus.on('task:pause', match),
      bus.on('task:resume', match),
      bus.on('task:settled', match),
      bus.on('stream:appended', match),
      bus.on('log:moved', match),
    );
    if (signal?.aborted) done();
    else signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * The entries of one task after `after`, as they are appended; with `streams`, also its stream
 * frames after `streamAfter`, each read merged with the entries by time (entries first on a tie).
 */
export async function* taskEvents(store: Store, bus: NewsBus, taskId: string, options: EventsOptions): AsyncGenerator<TaskEvent | StreamEvent> {
  // Entries and frames committed by this process are announced on the bus, and those of other
  // processes too where the store tells them (SQLite) or the log watch finds them (log-watch.ts);
  // the poll covers what neither does, more often for a streaming reader.
  const unfollow = (options.follow ?? true) ? followLog(store, bus, taskId) : null;
  try {
    yield* readTask(store, bus, taskId, options);
  } finally {
    unfollow?.();
  }
}

async function* readTask(store: Store, bus: NewsBus, taskId: string, options: EventsOptions): AsyncGenerator<TaskEvent | StreamEvent> {
  let after = typeof options.after === 'number' ? options.after : 0;
  let streamAfter = options.streamAfter ?? 0;
  const streams = options.streams === true;
  const follow = options.follow ?? true;
  const pollMs = options.pollMs ?? (streams ? 100 : 500);
  for (;;) {
    if (options.signal?.aborted) return;
    // The task's status is read before its entries: if it is final then, no entry can follow the
    // ones read next.
    const task = follow ? await store.getTask(taskId) : null;
    const rows = await store.getEvents(taskId, after, PAGE);
    const frames = streams ? await store.getChunks(taskId, streamAfter, PAGE) : [];
    let i = 0;
    let j = 0;
    while (i < rows.length || j < frames.length) {
      const row = rows[i];
      const frame = frames[j];
      if (row && (!frame || row.at <= frame.at)) {
        i++;
        after = row.seq;
        yield toTaskEvent(row);
      } else if (frame) {
        j++;
        streamAfter = frame.id;
        yield toStreamEvent(frame);
      }
      if (options.signal?.aborted) return;
    }
    if (rows.length === PAGE || frames.length === PAGE) continue;
    if (!follow) return;
    if (!task || task.status === 'succeeded' || task.status === 'cancelled') return;
    await waitForNews(bus, taskId, pollMs, options.signal);
  }
}

/**
 * The entries of every task after a cursor, as they are appended. The stores' log of every task
 * holds the entries stored on their own; a task's step results, which its journal rows carry, come
 * with the task's next such entry (its end, a park, a signal…), right before it, in the task's
 * order. Where the store's order is not a task's seq order (PostgreSQL, see `LogPage.prevSeq`),
 * the task's entries of lower seq placed after an entry come right before it too, and are passed
 * over when their place comes: each task's entries arrive once and in seq order.
 *
 * A cursor is the store's, then what the reader has delivered beyond it: `<store cursor>`, or
 * `<store cursor>|<seq>` for a place among the entries delivered with the next row (the seq of the
 * last of them), or `<store cursor>|<seq>|<ahead>` while entries delivered early have not reached
 * their place yet (`<task>:<seq>` pairs, comma-separated, task ids URI-encoded; `<seq>` is then
 * 0 for no place among the next row's).
 */
export async function* allEvents(store: Store, bus: NewsBus, options: EventsOptions): AsyncGenerator<TaskEvent & { cursor: string }> {
  const start = parseCursor(typeof options.after === 'string' ? options.after : null);
  let { cursor, within } = start;
  const { ahead } = start;
  if (cursor === 'now') cursor = await endCursor(store);
  const follow = options.follow ?? true;
  const pollMs = options.pollMs ?? 500;
  // A reader that ends at the end of the log ends at its end as of this call: it waits for the
  // entries committed before it that the store cannot hand out yet (see `LogPage.behind`).
  const mark = follow ? null : await store.logMark();
  let settleMs = 5;
  for (;;) {
    if (options.signal?.aborted) return;
    const page = await store.readLog(cursor, PAGE, mark);
    // The entries since each row's task's previous one placed before it (for the first row, since
    // the cursor's place among them), read for the whole page at once. A row delivered early needs
    // none (and is passed over below).
    const ranges: EventRange[] = [];
    const rangeOf = page.events.map((row, i) => {
      const from = i === 0 ? Math.max(row.prevSeq, within) : row.prevSeq;
      if (from >= row.seq - 1 || ahead.has(aheadKey(row.taskId, row.seq))) return -1;
      return ranges.push({ taskId: row.taskId, after: from, before: row.seq }) - 1;
    });
    const filled = await store.getEventRanges(ranges);
    for (const [i, row] of page.events.entries()) {
      within = 0;
      if (ahead.delete(aheadKey(row.taskId, row.seq))) {
        // Delivered early, before an entry of its task with a higher seq.
        cursor = row.cursor;
        continue;
      }
      for (const before of filled[rangeOf[i] as number] ?? []) {
        if (!RESULT_ENTRY_TYPES.includes(before.type)) ahead.add(aheadKey(row.taskId, before.seq));
        yield { ...toTaskEvent(before), cursor: formatCursor(cursor, before.seq, ahead) };
        if (options.signal?.aborted) return;
      }
      cursor = row.cursor;
      yield { ...toTaskEvent(row), cursor: formatCursor(cursor, 0, ahead) };
      if (options.signal?.aborted) return;
    }
    if (page.cursor !== null) cursor = page.cursor;
    if (page.events.length === PAGE) continue;
    if (!follow) {
      if (!page.behind) return;
      // The transactions holding the log back are usually a few milliseconds from their end.
      await waitForNews(bus, undefined, settleMs, options.signal);
      settleMs = Math.min(settleMs * 2, pollMs);
      continue;
    }
    await waitForNews(bus, undefined, pollMs, options.signal);
  }
}

/** An entry delivered before its place in the store's order, as the set of those holds it. */
const aheadKey = (taskId: string, seq: number): string => `${encodeURIComponent(taskId)}:${seq}`;

function formatCursor(cursor: string | null, within: number, ahead: ReadonlySet<string>): string {
  if (ahead.size) return `${cursor ?? ''}|${within}|${[...ahead].join(',')}`;
  return within ? `${cursor ?? ''}|${within}` : (cursor ?? '');
}

/** A cross-task cursor (see {@link allEvents}). */
function parseCursor(after: string | null): { cursor: string | null; within: number; ahead: Set<string> } {
  const ahead = new Set<string>();
  if (after === null) return { cursor: null, within: 0, ahead };
  const parts = after.split('|');
  if (parts.length === 1) return { cursor: after, within: 0, ahead };
  const bad = (): InvalidArgumentError => new InvalidArgumentError(`Invalid log cursor "${after}": pass the cursor of an event as it was given.`);
  const [store, place, early] = parts as [string, string, string | undefined];
  const within = Number(place);
  if (parts.length > 3 || store === 'now' || !/^\d+$/.test(place) || !Number.isSafeInteger(within)) throw bad();
  if (early === undefined) {
    if (within < 1) throw bad();
  } else {
    for (const pair of early.split(',')) {
      const m = /^([^:,|]+):([1-9]\d{0,15})$/.exec(pair);
      if (!m || !Number.isSafeInteger(Number(m[2]))) throw bad();
      let taskId: string;
      try {
        taskId = decodeURIComponent(m[1] as string);
      } catch {
        throw bad();
      }
      ahead.add(aheadKey(taskId, Number(m[2])));
    }
  }
  return { cursor: store || null, within, ahead };
}

/** The cursor at the current end of the log. */
async function endCursor(store: Store): Promise<string | null> {
  let cursor: string | null = null;
  for (;;) {
    const page = await store.readLog(cursor, PAGE * 10);
    if (page.cursor !== null) cursor = page.cursor;
    if (page.events.length < PAGE * 10) return cursor;
  }
}

/**
 * Hands the entries this process appends to `deliver`, once each and in order per task: on each
 * nudge it reads the task's entries after the last one delivered. Reads of one task never overlap.
 * Tasks are forgotten once finished (and after `maxTasks` others, oldest first).
 */
export class LogTail {
  readonly #store: Store;
  readonly #deliver: (e: TaskEvent) => void;
  readonly #maxTasks: number;
  readonly #seen = new Map<string, number>();
  readonly #reading = new Map<string, Promise<void>>();
  readonly #again = new Set<string>();

  constructor(store: Store, deliver: (e: TaskEvent) => void, maxTasks = 10_000) {
    this.#store = store;
    this.#deliver = deliver;
    this.#maxTasks = maxTasks;
  }

  /** New entries of `taskId` were committed here. */
  nudge(taskId: string): void {
    if (this.#reading.has(taskId)) {
      this.#again.add(taskId);
      return;
    }
    const p = this.#read(taskId).finally(() => {
      this.#reading.delete(taskId);
      if (this.#again.delete(taskId)) this.nudge(taskId);
    });
    this.#reading.set(taskId, p);
  }

  /** Resolves when every read started so far has delivered. */
  async idle(): Promise<void> {
    while (this.#reading.size) await Promise.all([...this.#reading.values()]);
  }

  async #read(taskId: string): Promise<void> {
    let after = this.#seen.get(taskId) ?? 0;
    let rows: EventRow[];
    try {
      rows = await this.#store.getEvents(taskId, after);
    } catch {
      return; // the store is away: the next nudge reads from the same place
    }
    let finished = false;
    for (const row of rows) {
      after = row.seq;
      const event = toTaskEvent(row);
      finished = event.type === 'transition' && isFinished(event.to) && event.to !== 'failed';
      this.#deliver(event);
    }
    this.#seen.delete(taskId);
    if (finished) return;
    this.#seen.set(taskId, after);
    if (this.#seen.size > this.#maxTasks) this.#seen.delete(this.#seen.keys().next().value as string);
  }
}
