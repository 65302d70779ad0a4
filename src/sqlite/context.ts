/**
 * @module sqlite/context
 * Internal: not part of the public API.
 * What every SQLite operation module works with: the connection, its statement cache, the write
 * transaction (`BEGIN IMMEDIATE`), the one place where driver errors become Stepwise errors, and
 * the two caches of the hot path (task id → internal key, a task's last log seq). It also holds
 * the log's appender, which numbers entries from that cache.
 */
import type Database from 'better-sqlite3';
import { SqliteFiles, damaged, openSqlite, type SqliteOptions } from './connection.ts';
import { ClosedError, StoreRefusedError, StoreUnavailableError } from '../errors.ts';
import { isRaw, patchAssignments, stepValuesOfTask, toStepRow } from '../rows.ts';
import { claimersOf, stepEntry, stepEntryAt } from '../log-entries.ts';
import { INSERT_EVENT_SQL, LAST_SEQ_SQL, UPSERT_STEP_SQL, inList } from './sql.ts';
import type { NewEvent, StepRow, TaskPatch } from '../store.ts';

export type Raw = Record<string, unknown>;

/** How many task id → internal key entries a connection keeps (see {@link SqliteContext.rememberNo}). */
const TASK_NO_CACHE = 10_000;

export class SqliteContext {
  readonly path: string;
  readonly options: SqliteOptions;
  #db: Database.Database | null;
  readonly #statements = new Map<string, Database.Statement>();
  /**
   * Task id → internal integer key, for the fenced writes of the runs this connection holds (a
   * leased task is never deleted). Reads look the key up afresh: a deleted task's key can be handed
   * out again.
   */
  readonly taskNos = new Map<string, number>();
  /**
   * The last log seq of recently written tasks, valid while no other connection has written the
   * file: SQLite's `data_version` changes exactly when another connection commits, and then the
   * cache is dropped and seqs are read again (see {@link takeSeqs}). A checkpoint so takes its
   * seq without a read or a write of its own, in the common case of one process per file.
   */
  readonly lastSeqs = new Map<number, number>();
  #dataVersion = -1;
  /** `data_version` was read in the write transaction under way (no other connection commits during one). */
  seqsChecked = false;

  /** The files the connection opened, checked before each write (see {@link SqliteFiles}); none in memory. */
  readonly #files: SqliteFiles | null;

  constructor(path: string, options: SqliteOptions) {
    this.path = path;
    this.options = options;
    this.#db = openSqlite(path, options);
    this.#files = path === ':memory:' ? null : new SqliteFiles(path);
  }

  /** Throws StoreDamagedError if the database's files were removed or replaced since they were opened. */
  checkFiles(): void {
    this.#files?.check();
  }

  get db(): Database.Database {
    if (!this.#db) throw new ClosedError('The SQLite store');
    return this.#db;
  }

  get open(): boolean {
    return this.#db !== null;
  }

  close(): void {
    if (!this.#db) return;
    this.#statements.clear();
    this.#db.close();
    this.#db = null;
  }

  stmt(sql: string): Database.Statement {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.translate(() => this.db.prepare(sql));
      this.#translateErrors(s);
      this.#statements.set(sql, s);
    }
    return s;
  }

  /**
   * Makes the statement's errors Stepwise errors, for the reads that run outside {@link tx} (a
   * corrupt page met by a list is STORE_DAMAGED with the path, not a driver error).
   */
  #translateErrors(s: Database.Statement): void {
    const methods = s as unknown as Record<'run' | 'get' | 'all', (...args: unknown[]) => unknown>;
    for (const name of ['run', 'get', 'all'] as const) {
      const call = methods[name].bind(s);
      methods[name] = (...args: unknown[]) => this.translate(() => call(...args));
    }
  }

  /** The internal key of a task as it is now (no cache), or undefined if there is no such task. */
  noNow(taskId: string): number | undefined {
    const row = this.stmt('SELECT no FROM stepwise_tasks WHERE id = ?').get(taskId) as { no: number } | undefined;
    return row?.no;
  }

  /** The internal key of a task, remembered (see {@link taskNos}), or undefined if there is no such task. */
  no(taskId: string): number | undefined {
    let no = this.taskNos.get(taskId);
    if (no === undefined) {
      no = this.noNow(taskId);
      if (no === undefined) return undefined;
      this.rememberNo(taskId, no);
    }
    return no;
  }

  /**
   * Caches a task's internal key. The cache holds the tasks this connection works on now; it is
   * emptied when it reaches its bound, so a worker that parks 100,000 tasks does not keep an entry
   * for each.
   */
  rememberNo(taskId: string, no: number): void {
    if (this.taskNos.size >= TASK_NO_CACHE) this.taskNos.clear();
    this.taskNos.set(taskId, no);
  }

  /** Forgets a deleted task (its key can be handed out again). */
  forget(taskId: string, no: number): void {
    this.taskNos.delete(taskId);
    this.lastSeqs.delete(no);
  }

  /** Runs `fn` in a `BEGIN IMMEDIATE` transaction; driver errors are translated here. */
  tx<T>(fn: () => T): T {
    this.seqsChecked = false;
    try {
      this.checkFiles();
      return this.translate(() => this.db.transaction(fn).immediate());
    } catch (e) {
      this.lastSeqs.clear(); // seqs taken by a transaction that rolled back were not used
      throw e;
    } finally {
      this.seqsChecked = false;
    }
  }

  /**
   * Drops the cached seqs if another connection committed since they were taken. Once per write
   * transaction: while it holds the write lock no other connection can commit.
   */
  checkSeqs(): void {
    if (this.seqsChecked) return;
    this.seqsChecked = true;
    const version = this.stmt('PRAGMA data_version').pluck().get() as number;
    if (version !== this.#dataVersion) {
      this.lastSeqs.clear();
      this.#dataVersion = version;
    }
  }

  /** The last seq of task `no`'s log, as known in this write transaction (read if unknown). */
  lastSeqOf(no: number): number {
    this.checkSeqs();
    let last = this.lastSeqs.get(no);
    if (last === undefined) {
      last = Number((this.stmt(LAST_SEQ_SQL).get(no, no) as { n: number }).n);
      this.knowSeq(no, last);
    }
    return last;
  }

  knowSeq(no: number, last: number): void {
    if (this.lastSeqs.size >= 10_000 && !this.lastSeqs.has(no)) this.lastSeqs.clear();
    this.lastSeqs.set(no, last);
  }

  /**
   * Takes `n` seqs of task `no`'s log; returns the last. Inside a write transaction (one writer at
   * a time, so no other connection can take seqs of the same task until it commits).
   */
  takeSeqs(no: number, n: number): number {
    const last = this.lastSeqOf(no) + n;
    this.lastSeqs.set(no, last);
    return last;
  }

  /**
   * The one place where SQLite errors become Stepwise errors: a file that stays locked past the
   * busy timeout, a full or read-only disk, an I/O error: the store is unavailable (retryable).
   * Other errors are bugs and pass through unchanged.
   */
  translate<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      throw this.storeError(e);
    }
  }

  /** A driver error as the engine sees it: a busy, locked or failing file is StoreUnavailableError (retryable). */
  storeError(e: unknown): unknown {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^SQLITE_(BUSY|LOCKED|IOERR|FULL|READONLY|CANTOPEN|PROTOCOL)/.test(code)) {
      return new StoreUnavailableError(`SQLite database ${this.path} is unavailable (${code}): ${(e as Error).message}`, { cause: e });
    }
    if (typeof code === 'string' && /^SQLITE_(CORRUPT|NOTADB)/.test(code)) return damaged(this.path, code, (e as Error).message, e);
    // Refused for the content of the write (a constraint, a value too big): the same write fails again.
    if (typeof code === 'string' && /^SQLITE_(CONSTRAINT|TOOBIG|MISMATCH|RANGE)/.test(code)) {
      return new StoreRefusedError(`SQLite database ${this.path} refused a write (${code}): ${(e as Error).message}. Retrying cannot fix this.`, { cause: e, dbCode: code });
    }
    return e;
  }

  /**
   * Appends entries to task `no`'s log, numbered after its last one (inside a write transaction).
   * Returns the seq given to each entry; an entry carried by a journal row (`carriedBy`) is not
   * written here: the caller stores its seq on that row.
   */
  append(no: number, at: number, entries: readonly NewEvent[]): number[] {
    if (!entries.length) return [];
    const last = this.takeSeqs(no, entries.length);
    this.insertEntries(no, at, entries, last);
    return entries.map((_e, i) => last - entries.length + 1 + i);
  }

  /** Writes `entries` (but those carried by journal rows) with the seqs up to `last`. */
  insertEntries(no: number, at: number, entries: readonly NewEvent[], last: number): void {
    const insert = this.stmt(INSERT_EVENT_SQL);
    entries.forEach((e, i) => {
      if (e.carriedBy === undefined) insert.run(no, last - entries.length + 1 + i, at, e.type, e.actorKind, e.actorId, e.data);
    });
  }

  /**
   * Before journal rows at `seqs` are deleted or rewritten, the entries they carry become entries
   * of their own (same seq), so the log keeps them: it is append-only.
   */
  materialize(no: number, taskId: string, seqs: readonly number[]): void {
    if (!seqs.length) return;
    const rows = this.stmt(`SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? AND log_seq IS NOT NULL AND seq IN (${inList(seqs.length)})`).all(taskId, no, ...seqs) as Raw[];
    if (!rows.length) return;
    const claimers = this.claimers(no);
    const insert = this.stmt(INSERT_EVENT_SQL);
    for (const r of rows) {
      const step = toStepRow(r);
      const entry = stepEntry('worker', claimers.get(step.epoch) ?? 'unknown', step);
      insert.run(no, Number(r.log_seq), stepEntryAt(step), entry.type, entry.actorKind, entry.actorId, entry.data);
    }
    this.stmt(`UPDATE stepwise_steps SET log_seq = NULL WHERE task_no = ? AND seq IN (${inList(seqs.length)})`).run(no, ...seqs);
  }

  /** The worker that took each lease epoch of task `no` (the writer of that epoch's journal rows). */
  claimers(no: number): Map<number, string> {
    const rows = this.stmt("SELECT actor_id, data FROM stepwise_events WHERE task_no = ? AND type = 'transition' AND actor_kind = 'worker'").all(no) as Raw[];
    return claimersOf(rows.map((r) => ({ actorKind: 'worker', actorId: String(r.actor_id), data: r.data === null ? null : String(r.data) })));
  }

  /** Task `no`'s journal, in seq order. */
  steps(taskId: string, no: number): StepRow[] {
    return (this.stmt('SELECT ? AS task_id, * FROM stepwise_steps WHERE task_no = ? ORDER BY seq').all(taskId, no) as Raw[]).map(toStepRow);
  }

  /** `, col = ?, …` for a patch, and its parameters; `now`: the store's time (the engine's clock). */
  assignments(patch: TaskPatch, now: number): { sets: string; params: unknown[] } {
    let sets = '';
    const params: unknown[] = [];
    for (const [col, value] of patchAssignments(patch, (b) => (b ? 1 : 0), now)) {
      if (isRaw(value)) sets += `, ${col} = ${value.raw}`;
      else {
        sets += `, ${col} = ?`;
        params.push(value);
      }
    }
    return { sets, params };
  }

  upsertStep(no: number, step: StepRow, logSeq: number | null): void {
    this.stmt(UPSERT_STEP_SQL).run(no, ...stepValuesOfTask(step), logSeq);
  }

  consume(signalId: number, seq: number): void {
    this.stmt('UPDATE stepwise_signals SET consumed_seq = ? WHERE id = ? AND consumed_seq IS NULL').run(seq, signalId);
  }
}
