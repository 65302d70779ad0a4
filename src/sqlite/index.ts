/**
 * @module stepwise-engine/sqlite
 * The embedded SQLite store, for `new Engine({ store: new SqliteStore(path, options) })` when the
 * URL form (`sqlite:<path>?synchronous=normal`) is not enough.
 */
export { SqliteStore } from './store.ts';
export type { SqliteStoreOptions } from './store.ts';
export type { SqliteOptions, SqliteSynchronous } from './connection.ts';
