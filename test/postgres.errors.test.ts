// What reaches a user when PostgreSQL refuses a statement: a Stepwise error with a code, naming
// the database and schema and the SQLSTATE, never the driver's raw error. The engine's up-front
// validation keeps these values out of start, signal and cancel, so the store is called directly
// with what the validation would have refused (the case of a value it does not foresee).
import { afterAll, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/postgres/store.ts';
import { isStepwiseError } from '../src/errors.ts';
import { planCreation } from '../src/transitions.ts';
import { transitionEntry } from '../src/log-entries.ts';
import { describeStoreUrl } from '../src/store-url.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres } from './support/postgres.ts';

const schema = freshSchemaName('sw_pgerr');
afterAll(async () => dropSchema(schema));

const T0 = 1_700_000_000_000;

/** The error `p` rejects with. */
function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
}

function expectRefused(e: unknown, sqlState: string): void {
  expect(isStepwiseError(e, 'STORE_REFUSED')).toBe(true);
  expect((e as { dbCode?: unknown }).dbCode).toBe(sqlState);
  expect((e as { retryable?: unknown }).retryable).toBe(false);
  expect((e as Error).message).toContain(`(schema ${schema})`);
  expect((e as Error).message).toContain(`SQLSTATE ${sqlState}`);
}

describe.skipIf(!(await hasPostgres()))('PostgreSQL errors', () => {
  it('turns driver refusals (22021 NUL byte, 22003 out of range) of start, signal and cancel into STORE_REFUSED naming the store', async () => {
    const store = new PostgresStore(PG_URL, { schema });
    try {
      await store.migrate();
      const task = (id: string, key: string | null) => ({
        id,
        workflow: 'wf',
        workflowVersion: '1',
        input: null,
        idempotencyKey: key,
        runAt: T0,
        createdAt: T0,
        ...planCreation({ kind: 'user', id: 'anonymous' }),
      });
      // start: a key with a NUL character.
      expectRefused(await rejection(store.insertTask(task('t-nul', 'key\u0000x'))), '22021');
      expect(await store.getTask('t-nul')).toBeNull();

      const { task: row } = await store.insertTask(task('t-ok', null));
      // signal: a name with a NUL character.
      expectRefused(await rejection(store.insertSignal({ taskId: row.id, name: 'go\u0000', payload: null, idempotencyKey: null, at: T0, actorKind: 'user', actorId: 'anonymous' })), '22021');
      // cancel: a time beyond what BIGINT holds.
      const at = 1e20;
      const log = [transitionEntry('user', 'anonymous', { event: 'cancel', from: row.status, to: 'cancelled', detail: null, output: null, error: null })];
      expectRefused(
        await rejection(store.transition({ kind: 'transition', taskId: row.id, from: [row.status], guard: { version: row.version }, set: {}, at, event: 'cancel', to: 'cancelled', log })),
        '22003',
      );
      // Nothing was written by the refused statements.
      const after = await store.getTask(row.id);
      expect(after?.status).toBe(row.status);
      expect(after?.version).toBe(row.version);
      expect(await store.getSignals(row.id)).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('refuses deadline options that are not whole positive milliseconds with INVALID_ARGUMENT', () => {
    for (const bad of ['abc', '0', '-5', '1.5']) {
      expect(() => describeStoreUrl(`${PG_URL}?statementTimeoutMs=${bad}`)).toThrow(/statementTimeoutMs=.* use a whole number of milliseconds/);
      expect(() => describeStoreUrl(`${PG_URL}?connectTimeoutMs=${bad}`)).toThrow(/connectTimeoutMs=.* use a whole number of milliseconds/);
    }
    expect(describeStoreUrl(`${PG_URL}?statementTimeoutMs=1500&connectTimeoutMs=700`)).toMatchObject({ statementTimeoutMs: 1500, connectTimeoutMs: 700 });
    expect(() => new PostgresStore(PG_URL, { schema, statementTimeoutMs: 0 })).toThrow(/statementTimeoutMs=0/);
  });
});
