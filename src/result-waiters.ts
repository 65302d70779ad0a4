/**
 * @module result-waiters
 * Internal: not part of the public API (the package exports only its index modules).
 * The `result()` calls of one engine waiting for tasks to finish, by task id, and their reads.
 *
 * News of a finished task (from this process's workers or commands, or a notification from
 * another process, which may name a whole batch of tasks) wakes the waiters of that task only, so
 * that a thousand waiting calls cost one listener, not a thousand checks per finished task. `'*'`
 * (notifications may have been missed) wakes every waiter. News from this process carries the
 * task's outcome (status, output, error, cancel reason) as the write that finished it committed
 * it (what a read would return): the waiter takes it without reading. Other news makes the waiter
 * read its task again.
 *
 * Reads are grouped: the reads asked for in the same turn of the event loop go into one
 * `Store.getTasks` call, so that a batch of waiters woken together (or a burst of `result()`
 * calls) costs one query, not one per task. A few groups may be in flight at once (one read that
 * hangs on a broken connection does not hold up the others); past that, reads wait and form one
 * group.
 *
 * A task this engine has just created, and whose end it has heard no news of since, is known
 * unfinished: a `result()` call for it need not read it first. Its end will be announced, or, if
 * the announcement is lost, found by the call's poll.
 */
import type { Clock } from './clock.ts';
import { isFinished } from './lifecycle.ts';
import type { NewsBus } from './news.ts';
import type { Store, TaskOutcome, TaskRow } from './store.ts';

/** Most ids in one grouped read. */
const READ_BATCH = 1000;
/** Most grouped reads in flight at once. */
const READS_IN_FLIGHT = 4;
/** Most tasks remembered as known unfinished (past it, the memory starts afresh: calls read first). */
const UNHEARD_MAX = 100_000;

/** One `result()` call's interest in a task, registered before its first read. */
export interface Watch {
  /** The finished task's outcome, once news from this process handed it over. */
  readonly settled: TaskOutcome | null;
  /** Forgets news that came so far (call it before each read: the read covers that news). */
  reset(): void;
  /**
   * Resolves at the next news of the task (at once when news came since `reset()`), after `ms`,
   * or when `signal` aborts, whichever is first: `'timeout'` when `ms` passed without news.
   */
  next(ms: number, signal?: AbortSignal): Promise<'news' | 'timeout'>;
  /** Stops listening (the call is over). */
  close(): void;
}

class Waiter implements Watch {
  settled: TaskOutcome | null = null;
  #news = false;
  #wake: (() => void) | null = null;
  readonly #close: (w: Waiter) => void;

  constructor(close: (w: Waiter) => void) {
    this.#close = close;
  }

  tell(row: TaskOutcome | undefined): void {
    if (row && isFinished(row.status)) this.settled = row;
    this.#news = true;
    this.#wake?.();
  }

  reset(): void {
    this.#news = false;
  }

  next(ms: number, signal?: AbortSignal): Promise<'news' | 'timeout'> {
    if (this.#news || this.settled || signal?.aborted) return Promise.resolve('news');
    return new Promise<'news' | 'timeout'>((resolve) => {
      const done = (why: 'news' | 'timeout'): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', woken);
        this.#wake = null;
        resolve(why);
      };
      const woken = (): void => done('news');
      const timer = setTimeout(() => done('timeout'), ms);
      this.#wake = woken;
      signal?.addEventListener('abort', woken, { once: true });
    });
  }

  close(): void {
    this.#wake?.();
    this.#close(this);
  }
}

interface PendingRead {
  id: string;
  /** When the caller stops waiting for the read (ms since the epoch; Infinity: never). */
  deadline: number;
  late: () => Error;
  resolve: (row: TaskRow | null) => void;
  reject: (e: unknown) => void;
}

export class ResultWaiters {
  readonly #waiting = new Map<string, Set<Waiter>>();
  readonly #bus: NewsBus;
  readonly #clock: Clock;
  #off: (() => void) | null = null;
  /** Tasks created here with no news of their end since (see the module's doc). */
  readonly #unheard = new Set<string>();
  #offUnheard: (() => void) | null = null;
  #reads: PendingRead[] = [];
  #reading = 0;
  #scheduled = false;

  constructor(bus: NewsBus, clock: Clock) {
    this.#bus = bus;
    this.#clock = clock;
  }

  /** How many calls are waiting (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiting.values()) n += set.size;
    return n;
  }

  /**
   * Remembers tasks just created by this engine, whose end this process will hear of (its own
   * workers announce it; another process's announcement reaches it through the store's channel).
   */
  created(ids: readonly string[]): void {
    this.#offUnheard ??= this.#bus.on('task:settled', ({ taskId }) => {
      if (taskId === '*') this.#unheard.clear();
      else this.#unheard.delete(taskId);
    });
    for (const id of ids) {
      // Tasks whose end is never announced (a lease expiry) must not pile up: start afresh.
      if (this.#unheard.size >= UNHEARD_MAX) this.#unheard.clear();
      this.#unheard.add(id);
    }
  }

  /** Whether `taskId` is known unfinished: created here, and no news of its end since. */
  knownUnfinished(taskId: string): boolean {
    return this.#unheard.has(taskId);
  }

  /** Forgets the tasks remembered by `created` (the engine is closing). */
  forget(): void {
    this.#unheard.clear();
    this.#offUnheard?.();
    this.#offUnheard = null;
  }

  /** Registers interest in news of `taskId` from now on. */
  watch(taskId: string): Watch {
    this.#off ??= this.#bus.on('task:settled', ({ taskId: id, row }) => this.#tell(id, row));
    const waiter = new Waiter((w) => {
      const set = this.#waiting.get(taskId);
      set?.delete(w);
      if (set && !set.size) this.#waiting.delete(taskId);
      if (!this.#waiting.size && this.#off) {
        this.#off();
        this.#off = null;
      }
    });
    let set = this.#waiting.get(taskId);
    if (!set) this.#waiting.set(taskId, (set = new Set()));
    set.add(waiter);
    return waiter;
  }

  /**
   * The task's row (null: no such task), read with the other reads asked for in this turn (or,
   * while the most groups are in flight, until one of them is answered). Rejects with `late()`
   * once `deadline` passes (a store whose calls hang must not hold a caller past its timeout).
   */
  read(store: Store, id: string, deadline = Infinity, late: () => Error = () => new Error(`Task ${id} could not be read in time.`)): Promise<TaskRow | null> {
    return new Promise<TaskRow | null>((resolve, reject) => {
      this.#reads.push({ id, deadline, late, resolve, reject });
      if (!this.#scheduled && this.#reading < READS_IN_FLIGHT) {
        this.#scheduled = true;
        // After the current phase of the event loop: the calls woken by the timers that fell due
        // together, or by the notifications that arrived together, read in one group.
        setImmediate(() => {
          this.#scheduled = false;
          this.#pump(store);
        });
      }
    });
  }

  #pump(store: Store): void {
    if (this.#reading >= READS_IN_FLIGHT || !this.#reads.length) return;
    const group = this.#reads.splice(0, READ_BATCH);
    this.#reading++;
    const read = readGroup(store, group);
    // One timer for the group, at its earliest deadline: a caller whose deadline passes is
    // answered then; the others go on waiting for the read.
    if (group.some((r) => r.deadline !== Infinity)) void this.#overdue(group, read);
    void read.finally(() => {
      this.#reading--;
      this.#pump(store);
    });
  }

  async #overdue(group: readonly PendingRead[], read: Promise<void>): Promise<void> {
    const stop = new AbortController();
    void read.finally(() => stop.abort(null));
    let open = group.filter((r) => r.deadline !== Infinity);
    while (open.length && !stop.signal.aborted) {
      const next = Math.min(...open.map((r) => r.deadline));
      try {
        await this.#clock.sleep(Math.max(0, next - this.#clock.now()), stop.signal);
      } catch {
        return; // the read answered
      }
      const now = this.#clock.now();
      for (const r of open) if (now >= r.deadline) r.reject(r.late());
      open = open.filter((r) => now < r.deadline);
    }
  }

  #tell(taskId: string, row: TaskOutcome | undefined): void {
    const sets = taskId === '*' ? [...this.#waiting.values()] : [this.#waiting.get(taskId)];
    for (const set of sets) for (const w of set ?? []) w.tell(row);
  }
}

/** One query for the whole group (a store without `getTasks` reads each task on its own). */
async function readGroup(store: Store, group: readonly PendingRead[]): Promise<void> {
  const ids = [...new Set(group.map((r) => r.id))];
  let byId: Map<string, TaskRow>;
  try {
    const rows = store.getTasks ? await store.getTasks(ids) : (await Promise.all(ids.map((id) => store.getTask(id)))).filter((r): r is TaskRow => r !== null);
    byId = new Map(rows.map((r) => [r.id, r]));
  } catch (e) {
    for (const r of group) r.reject(e);
    return;
  }
  for (const r of group) r.resolve(byId.get(r.id) ?? null);
}
