/**
 * @module sqlite/connection
 * @internal
 * Opens a SQLite file for Stepwise: WAL journal (readers never block the writer, several processes
 * share the file), `synchronous=FULL` by default so that a committed checkpoint survives power loss
 * (`NORMAL` is faster and still survives a crashed process, but may lose the last commits on power
 * loss), and a busy timeout so that writers from other processes queue instead of failing.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreUnavailableError } from '../errors.ts';

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
}

export function openSqlite(path: string, options: SqliteOptions = {}): Database.Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  let db: Database.Database;
  try {
    db = new Database(path, { timeout: options.busyTimeoutMs ?? 5000 });
  } catch (e) {
    throw new StoreUnavailableError(`Cannot open SQLite database ${path}: ${(e as Error).message}`, { cause: e });
  }
  // Switching to WAL needs a moment of exclusive access; another process doing the same may hold it.
  for (let attempt = 0; ; attempt++) {
    try {
      db.pragma('journal_mode = WAL');
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== 'SQLITE_BUSY' || attempt > 50) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    }
  }
  db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = OFF');
  return db;
}
