// Group commit and refusals: when the store refuses one op of a batch for its content
// (STORE_REFUSED), the others are still written, the refused one fails at once, and nothing is
// retried. Runs on a real SQLite file (a trigger refuses one step name) and, when it is up, on
// PostgreSQL (a CHECK constraint does).
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { SqliteStore } from '../src/sqlite/store.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import { WriteBatcher } from '../src/write-batcher.ts';
import { isStepwiseError } from '../src/errors.ts';
import { claimOf } from './support/claims.ts';
import { planCreation } from '../src/transitions.ts';
import type { StepRow, Store, TaskRow } from '../src/store.ts';
import { tempDir } from './support/engine.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, sql } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const schema = freshSchemaName('sw_batchref');
afterAll(async () => {
  if (await hasPostgres()) await dropSchema(schema);
});

async function sqliteStore(): Promise<Store> {
  const path = join(tempDir(), 'batch.db');
  const store = new SqliteStore(path);
  await store.migrate();
  const db = new Database(path);
  db.exec(`CREATE TRIGGER refuse_poison BEFORE INSERT ON stepwise_steps WHEN NEW.name = 'poison' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
  db.close();
  return store;
}

async function postgresStore(): Promise<Store> {
  const store = new PostgresStore(PG_URL, { schema });
  await store.migrate();
  await sql(`ALTER TABLE "${schema}".steps ADD CONSTRAINT refuse_poison CHECK (name <> 'poison')`);
  return store;
}

async function claimedTasks(store: Store, n: number): Promise<TaskRow[]> {
  const ids = Array.from({ length: n }, (_, i) => `t-${i}-${Math.random().toString(36).slice(2)}`);
  for (const id of ids) {
    await store.insertTask({ id, workflow: 'wf', workflowVersion: '1', input: null, idempotencyKey: null, runAt: T0, createdAt: T0, ...planCreation({ kind: 'user', id: 'anonymous' }) });
  }
  const claimed = await store.claim(claimOf('w1', T0, n));
  return ids.map((id) => claimed.find((c) => c.task.id === id)?.task as TaskRow);
}

function step(task: TaskRow, name: string): StepRow {
  return {
    taskId: task.id,
    seq: 0,
    name,
    kind: 'step',
    status: 'completed',
    output: '1',
    error: null,
    attempts: 1,
    startedAt: T0,
    finishedAt: T0 + 1,
    wakeAt: null,
    epoch: task.epoch,
    done: 1,
    calledAfter: 0,
    businessKey: null,
  };
}

const stores: Array<[string, () => Promise<Store>, boolean]> = [
  ['sqlite', sqliteStore, true],
  ['postgres', postgresStore, await hasPostgres()],
];

describe('group commit with a refused op', () => {
  for (const [name, open, enabled] of stores) {
    it.skipIf(!enabled)(`writes the other ops of the batch and fails only the refused one, without retrying (${name})`, async () => {
      const store = await open();
      try {
        const [a, b, c] = await claimedTasks(store, 3);
        if (!a || !b || !c) throw new Error('tasks were not claimed');
        const retries: unknown[] = [];
        let batches = 0;
        const counting: Store = Object.assign(Object.create(store) as Store, {
          writeBatch: (ops: Parameters<Store['writeBatch']>[0]) => {
            batches++;
            return store.writeBatch(ops);
          },
          writeBatchNow: undefined,
        });
        const writer = new WriteBatcher(counting, { alone: () => false, onRetry: (e) => retries.push(e) });
        // Requested in one tick: one batch.
        const results = await Promise.allSettled([
          writer.write({ kind: 'step', taskId: a.id, epoch: a.epoch, step: step(a, 'fine') }),
          writer.write({ kind: 'step', taskId: b.id, epoch: b.epoch, step: step(b, 'poison') }),
          writer.write({ kind: 'step', taskId: c.id, epoch: c.epoch, step: step(c, 'also fine') }),
        ]);
        expect(results[0]).toEqual({ status: 'fulfilled', value: true });
        expect(results[2]).toEqual({ status: 'fulfilled', value: true });
        expect(results[1]?.status).toBe('rejected');
        expect(isStepwiseError((results[1] as PromiseRejectedResult).reason, 'STORE_REFUSED')).toBe(true);
        expect(retries).toEqual([]);
        expect(batches).toBe(4); // the batch of three, then each op on its own
        expect((await store.getSteps(a.id)).map((s) => s.name)).toEqual(['fine']);
        expect(await store.getSteps(b.id)).toEqual([]);
        expect((await store.getSteps(c.id)).map((s) => s.name)).toEqual(['also fine']);
      } finally {
        await store.close();
      }
    });
  }
});
