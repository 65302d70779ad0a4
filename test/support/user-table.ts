// A table of the user's own in the engine's database (what ctx.transaction writes to): created in
// the store's schema on PostgreSQL (or the SQLite file), read from a connection of the test's own.
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { sql } from './postgres.ts';

export interface UserTable {
  /** The qualified name to use in SQL. */
  name: string;
  dialect: 'sqlite' | 'postgres';
  /** `?` placeholders on SQLite, `$n` on PostgreSQL. */
  p: (n: number) => string;
  create(columns: string): Promise<void>;
  rows<T = Record<string, unknown>>(orderBy?: string): Promise<T[]>;
}

export function userTable(url: string, base = 'orders'): UserTable {
  const suffix = randomBytes(3).toString('hex');
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/\?.*$/, '');
    const name = `${base}_${suffix}`;
    const withDb = <T>(fn: (db: Database.Database) => T): T => {
      const db = new Database(path, { timeout: 10_000 });
      try {
        return fn(db);
      } finally {
        db.close();
      }
    };
    return {
      name,
      dialect: 'sqlite',
      p: () => '?',
      create: async (columns) => void withDb((db) => db.exec(`CREATE TABLE ${name} (${columns})`)),
      rows: async <T>(orderBy = 'rowid') => withDb((db) => db.prepare(`SELECT * FROM ${name} ORDER BY ${orderBy}`).all() as T[]),
    };
  }
  const schema = new URL(url).searchParams.get('schema') ?? 'public';
  const name = `"${schema}".${base}_${suffix}`;
  return {
    name,
    dialect: 'postgres',
    p: (n) => `$${n}`,
    create: async (columns) => {
      await sql(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await sql(`CREATE TABLE ${name} (${columns})`);
    },
    rows: async <T>(orderBy = 'ctid') => (await sql(`SELECT * FROM ${name} ORDER BY ${orderBy}`)) as T[],
  };
}
