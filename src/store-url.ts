/**
 * @module store-url
 * Opens a store from a URL: `sqlite:<path>` (relative to the working directory, or absolute;
 * `sqlite::memory:` for a private in-memory database) with optional `?synchronous=normal`, or
 * `postgres://…` / `postgresql://…` with optional `?schema=name` (the PostgreSQL store is loaded
 * only when asked for).
 */
import { resolve } from 'node:path';
import { InvalidArgumentError } from './errors.ts';
import { optionNames } from './option-keys.ts';
import type { Store } from './store.ts';
import type { SqliteOptions, SqliteSynchronous } from './sqlite/connection.ts';

/** The store used when none is given: a file in the working directory. */
export const DEFAULT_STORE_URL = 'sqlite:./.stepwise/stepwise.db';

export interface StoreOptions {
  sqlite?: SqliteOptions;
  postgres?: { schema?: string; poolSize?: number; connectTimeoutMs?: number; statementTimeoutMs?: number };
}

/** Every option of `StoreOptions.postgres` and `StoreOptions.sqlite`; a key not listed is refused. */
export const POSTGRES_OPTIONS = optionNames<NonNullable<StoreOptions['postgres']>>()('schema', 'poolSize', 'connectTimeoutMs', 'statementTimeoutMs');
export const SQLITE_OPTIONS = optionNames<SqliteOptions>()('synchronous', 'busyTimeoutMs', 'mustExist');

export function describeStoreUrl(
  url: string,
):
  | { dialect: 'sqlite'; path: string; options: SqliteOptions }
  | { dialect: 'postgres'; url: string; schema?: string; poolSize?: number; connectTimeoutMs?: number; statementTimeoutMs?: number } {
  if (typeof url !== 'string' || !url) throw new InvalidArgumentError('The store URL is empty: use sqlite:<path> or postgres://…');
  if (/^postgres(ql)?:\/\//i.test(url)) {
    // `?schema=name` selects the schema that holds Stepwise's tables and `?poolSize=n` the number
    // of connections a process opens; the rest goes to the driver.
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidArgumentError('The PostgreSQL URL is malformed: use postgres://user:password@host:port/database');
    }
    const schema = parsed.searchParams.get('schema');
    const pool = parsed.searchParams.get('poolSize');
    // `?connectTimeoutMs=` and `?statementTimeoutMs=`: the deadlines of every database call.
    const deadlines: { connectTimeoutMs?: number; statementTimeoutMs?: number } = {};
    for (const name of ['connectTimeoutMs', 'statementTimeoutMs'] as const) {
      const v = parsed.searchParams.get(name);
      if (v === null) continue;
      const ms = Number(v);
      if (!/^\d+$/.test(v) || !Number.isSafeInteger(ms) || ms < 1 || ms > 86_400_000) {
        throw new InvalidArgumentError(`${name}=${v} in the PostgreSQL URL: use a whole number of milliseconds from 1 to 86400000`);
      }
      deadlines[name] = ms;
      parsed.searchParams.delete(name);
    }
    if (schema === null && pool === null && !Object.keys(deadlines).length) return { dialect: 'postgres', url };
    let poolSize: number | undefined;
    if (pool !== null) {
      poolSize = Number(pool);
      if (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1000) {
        throw new InvalidArgumentError(`poolSize=${pool} in the PostgreSQL URL: use a whole number of connections from 1 to 1000`);
      }
    }
    parsed.searchParams.delete('schema');
    parsed.searchParams.delete('poolSize');
    return { dialect: 'postgres', url: parsed.toString(), ...(schema !== null ? { schema } : {}), ...(poolSize !== undefined ? { poolSize } : {}), ...deadlines };
  }
  if (url.startsWith('sqlite:')) {
    let rest = url.slice('sqlite:'.length);
    const q = rest.indexOf('?');
    const params = new URLSearchParams(q >= 0 ? rest.slice(q + 1) : '');
    if (q >= 0) rest = rest.slice(0, q);
    if (rest.startsWith('//')) rest = rest.slice(2); // sqlite:///abs/path
    if (!rest) throw new InvalidArgumentError(`Store URL "${url}" has no path: use sqlite:./stepwise.db`);
    const options: SqliteOptions = {};
    for (const [k, v] of params) {
      if (k === 'synchronous') {
        const s = v.toUpperCase();
        if (s !== 'FULL' && s !== 'NORMAL') throw new InvalidArgumentError(`synchronous=${v} in "${url}": use full or normal`);
        options.synchronous = s as SqliteSynchronous;
      } else if (k === 'busyTimeoutMs') {
        const ms = Number(v);
        if (!/^\d+$/.test(v) || !Number.isSafeInteger(ms)) throw new InvalidArgumentError(`busyTimeoutMs=${v} in "${url}": use a whole number of milliseconds`);
        options.busyTimeoutMs = ms;
      } else {
        throw new InvalidArgumentError(`Unknown option "${k}" in store URL "${url}" (known: synchronous, busyTimeoutMs)`);
      }
    }
    return { dialect: 'sqlite', path: rest === ':memory:' ? rest : resolve(rest), options };
  }
  throw new InvalidArgumentError(`Unsupported store URL "${url}": use sqlite:<path> or postgres://user@host:port/database`);
}

export async function openStore(url: string, options: StoreOptions = {}): Promise<Store> {
  const d = describeStoreUrl(url);
  if (d.dialect === 'sqlite') {
    const { SqliteStore } = await import('./sqlite/store.ts');
    return new SqliteStore(d.path, { ...options.sqlite, ...d.options });
  }
  const { PostgresStore } = await import('./postgres/store.ts');
  return new PostgresStore(d.url, {
    ...options.postgres,
    ...(d.schema !== undefined ? { schema: d.schema } : {}),
    ...(d.poolSize !== undefined ? { poolSize: d.poolSize } : {}),
    ...(d.connectTimeoutMs !== undefined ? { connectTimeoutMs: d.connectTimeoutMs } : {}),
    ...(d.statementTimeoutMs !== undefined ? { statementTimeoutMs: d.statementTimeoutMs } : {}),
  });
}
