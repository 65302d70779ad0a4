/**
 * @module stepwise-engine/postgres
 * The PostgreSQL store, for many workers on many machines. Needs the optional peer dependency
 * `pg` (`npm install pg`). Most users pass a `postgres://…` URL to `new Engine({ store })`, which
 * loads this module on demand; import it directly to construct the store with options.
 *
 * @example
 * ```ts
 * import { Engine } from 'stepwise-engine';
 * import { PostgresStore } from 'stepwise-engine/postgres';
 * const store = new PostgresStore('postgres://app@db/app', { schema: 'agents', poolSize: 20 });
 * const engine = new Engine({ store, workflows: [publish] });
 * ```
 */
export { PostgresStore } from './store.ts';
export type { PostgresStoreOptions } from './store.ts';
