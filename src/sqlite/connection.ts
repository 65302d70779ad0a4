/**
 * @module sqlite/connection
 * Internal: not part of the public API (the package exports only its index modules).
 * Opens a SQLite file for Stepwise: WAL journal (readers never block the writer, several processes
 * share the file), `synchronous=FULL` by default so that a committed checkpoint survives power loss
 * (`NORMAL` is faster and still survives a crashed process, but may lose the last commits on power
 * loss), and a busy timeout so that writers from other processes queue instead of failing.
 */
import Database from 'better-sqlite3';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { InvalidArgumentError, StoreDamagedError, StoreUnavailableError } from '../errors.ts';

export type SqliteSynchronous = 'FULL' | 'NORMAL';

export interface SqliteOptions {
  /** Durability of each commit. @defaultValue 'FULL' */
  synchronous?: SqliteSynchronous;
  /**
   * How long a write waits for another process's write lock before failing. Writes are short, so
   * a long wait means something is wrong; failing fast would turn contention into task errors.
   * @defaultValue 5000
   */
  busyTimeoutMs?: number;
  /**
   * Refuse to create the file (and its directory): for read-only commands, where a mistyped path
   * must be an error, not a new empty database. @defaultValue false
   */
  mustExist?: boolean;
}

/** Errors of opening a file, with the path and what to do about them. */
function openError(path: string, e: unknown): Error {
  const code = (e as { code?: string }).code;
  const message = (e as Error).message;
  if (code === 'SQLITE_NOTADB') return new InvalidArgumentError(`${path} is not a SQLite database (${message}). Check the sqlite: path.`, { cause: e });
  if (code === 'SQLITE_CORRUPT') return damaged(path, code, message, e);
  if (code === 'EEXIST' || code === 'ENOTDIR' || code === 'EACCES' || code === 'EROFS' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY') {
    return new InvalidArgumentError(`Cannot open SQLite database ${path}: ${message}${code?.startsWith('SQLITE') ? '' : ` (${code})`}. Check that the directory exists and is writable.`, {
      cause: e,
    });
  }
  return new StoreUnavailableError(`Cannot open SQLite database ${path}: ${message}`, { cause: e });
}

/**
 * Refuses a database whose write-ahead log vanished while it was in use. Commits live in the
 * `-wal` file until a checkpoint copies them into the main file; SQLite deletes the `-wal` and then
 * the `-shm` (its index) only when the last connection closes cleanly. A `-shm` without a `-wal`
 * therefore means the log was removed while processes had the database open (or before one that
 * crashed was recovered): opening it would silently serve the database as it was before those
 * commits. What this cannot see: both files removed, or the main file copied alone while it was in
 * use (back up with `sqlite3 .backup` or with every process stopped).
 */
function checkWalPresent(path: string): void {
  const wal = `${path}-wal`;
  const shm = `${path}-shm`;
  // A last connection closing deletes the -wal just before the -shm: look again for a moment.
  for (let look = 0; look < 10; look++) {
    if (!existsSync(shm) || existsSync(wal)) return;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
  throw new StoreDamagedError(
    `The SQLite database ${path} has lost its write-ahead log: ${shm} exists but ${wal} does not, so commits not yet copied into the main file are gone ` +
      'and opening it would show an older state. Stop every process using it; restore the -wal file (or the database from a backup). ' +
      `To accept the older state, delete ${shm} once no process uses the database.`,
    { path },
  );
}

/** A corrupt database met while it is in use, with its path and what to do. */
export function damaged(path: string, code: string, message: string, cause: unknown): StoreDamagedError {
  return new StoreDamagedError(
    `The SQLite database ${path} is damaged (${code}: ${message}). Stop every process using it, then check it with \`sqlite3 ${path} 'PRAGMA integrity_check'\` ` +
      'and restore it from a backup (or recover what is readable with `sqlite3 .recover`).',
    { path, cause },
  );
}

/** A file's identity: the same path may name another file after a removal or a replacement. */
type FileId = { dev: number; ino: number } | null;

function fileId(path: string): FileId {
  const s = statSync(path, { throwIfNoEntry: false });
  return s ? { dev: s.dev, ino: s.ino } : null;
}

/**
 * Notices that a database's files were removed or replaced while a connection had them open. A
 * connection writes into the files it opened even after their names are gone: its commits would be
 * reported as done, and lost when the database is opened again (deleting `-wal` and `-shm` together
 * looks to the next process like a clean shutdown). SQLite itself removes the `-wal` only when the
 * last connection closes, so while this one is open the main file and its `-wal` (once a first
 * commit has made it) must stay the same files. Checked before each write transaction, two `stat`
 * calls; once the files are found changed every later check fails the same way.
 */
export class SqliteFiles {
  readonly #path: string;
  readonly #main: FileId;
  #wal: FileId;
  #broken: StoreDamagedError | null = null;

  constructor(path: string) {
    this.#path = path;
    this.#main = fileId(path);
    this.#wal = fileId(`${path}-wal`);
  }

  /** Throws {@link StoreDamagedError} if the files are no longer the ones this connection uses. */
  check(): void {
    if (this.#broken) throw this.#broken;
    const path = this.#path;
    const main = fileId(path);
    const wal = fileId(`${path}-wal`);
    let lost: string | null = null;
    if (!same(main, this.#main)) lost = main ? `${path} was replaced by another file` : `${path} was removed`;
    else if (this.#wal && !same(wal, this.#wal)) lost = wal ? `its write-ahead log ${path}-wal was replaced by another file` : `its write-ahead log ${path}-wal was removed`;
    if (lost === null) {
      this.#wal ??= wal;
      return;
    }
    this.#broken = new StoreDamagedError(
      `The SQLite database ${path} changed under this process: ${lost} while it was open, so what it commits now would be lost when the database is opened again. ` +
        'It stops writing. Stop every process using the database, restore its files (or the database from a backup), and start again.',
      { path },
    );
    throw this.#broken;
  }
}

function same(a: FileId, b: FileId): boolean {
  return a !== null && b !== null && a.dev === b.dev && a.ino === b.ino;
}

/** @internal */
export function openSqlite(path: string, options: SqliteOptions = {}): Database.Database {
  if (options.mustExist && path !== ':memory:' && !existsSync(path)) {
    throw new InvalidArgumentError(`There is no Stepwise database at ${path}. Check the sqlite: path (--db or STEPWISE_DB); a worker or \`stepwise migrate\` creates it.`);
  }
  if (path !== ':memory:') checkWalPresent(path);
  let db: Database.Database;
  try {
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000, fileMustExist: options.mustExist === true });
  } catch (e) {
    throw openError(path, e);
  }
  // Switching to WAL needs a moment of exclusive access; another process doing the same may hold it.
  for (let attempt = 0; ; attempt++) {
    try {
      db.pragma('journal_mode = WAL');
      break;
    } catch (e) {
      if ((e as { code?: string }).code === 'SQLITE_BUSY' && attempt <= 50) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
        continue;
      }
      db.close();
      throw openError(path, e);
    }
  }
  db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = OFF');
  return db;
}
