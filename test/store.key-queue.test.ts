// Tasks held back behind their concurrency key, on both stores: a task started behind a full key
// is stored held and a claim does not read it; room opening in the key (a run's end, a queued
// task's cancel, a deletion) releases the next held tasks in due order inside the same write; the
// release pass catches a task left held with room in its key. Holding decides which rows a claim
// reads, never how many of a key run: a held task released early is still refused by the claim.
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteStore } from '../src/sqlite/store.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import { planTransition } from '../src/transitions.ts';
import type { NewTask, Store, TaskRow } from '../src/store.ts';
import { claimOf } from './support/claims.ts';
import { newTask } from './support/rows.ts';
import { FAST } from './support/engine.ts';
import { Engine, workflow } from '../src/index.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, sql } from './support/postgres.ts';

const T0 = 1_700_000_000_000;
const pgUp = await hasPostgres();
const cleanups: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const f of cleanups.splice(0)) await f();
});

interface Backend {
  name: string;
  open(): Promise<{ url: string; store: Store; held(): Promise<string[]>; raw(text: string): Promise<void> }>;
}

const sqlite: Backend = {
  name: 'sqlite',
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'stepwise-keyq-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'stepwise.db');
    const store = new SqliteStore(file);
    await store.migrate();
    const db = new Database(file);
    cleanups.push(() => void db.close());
    return {
      url: `sqlite:${file}`,
      store,
      held: async () => (db.prepare('SELECT id FROM stepwise_tasks WHERE held_by_key = 1 ORDER BY id').all() as Array<{ id: string }>).map((r) => r.id),
      raw: async (text) => void db.exec(text.replaceAll('$tasks', 'stepwise_tasks').replaceAll('$false', '0').replaceAll('$true', '1')),
    };
  },
};

const postgres: Backend = {
  name: 'postgres',
  async open() {
    const schema = freshSchemaName('sw_keyq');
    cleanups.push(() => dropSchema(schema));
    const store = new PostgresStore(PG_URL, { schema });
    await store.migrate();
    return {
      url: `${PG_URL}?schema=${schema}`,
      store,
      held: async () => (await sql<{ id: string }>(`SELECT id FROM "${schema}".tasks WHERE held_by_key ORDER BY id`)).map((r) => r.id),
      raw: async (text) => void (await sql(text.replaceAll('$tasks', `"${schema}".tasks`).replaceAll('$false', 'false').replaceAll('$true', 'true'))),
    };
  },
};

function keyed(id: string, key: string, at = T0, extra: Partial<NewTask> = {}): NewTask {
  return { ...newTask(id), runAt: at, createdAt: at, concurrencyKey: key, concurrencyLimit: 1, ...extra };
}

const claimedIds = async (store: Store, now: number): Promise<string[]> => (await store.claim(claimOf('w', now))).map((c) => c.task.id).sort();

async function complete(store: Store, task: TaskRow, at: number): Promise<void> {
  const { write } = planTransition({
    taskId: task.id,
    state: task,
    event: 'complete',
    guard: { epoch: task.epoch },
    at,
    workerId: 'w',
    set: { clearLease: true, output: '1', finishedAt: at },
  });
  expect(await store.transition(write)).not.toBeNull();
}

async function cancel(store: Store, task: TaskRow, at: number): Promise<void> {
  const { write } = planTransition({ taskId: task.id, state: task, event: 'cancel', guard: { version: task.version }, at, actor: { kind: 'user', id: 'u' }, set: { finishedAt: at } });
  expect(await store.transition(write)).not.toBeNull();
}

describe.each([sqlite, ...(pgUp ? [postgres] : [])])('tasks held behind their key ($name)', (backend) => {
  it('stores a task started behind a full key held, claims past it, and releases the next in due order when the run ends', async () => {
    const { store, held } = await backend.open();
    await store.insertTask(keyed('a1', 'a'));
    const [first] = await store.claim(claimOf('w', T0 + 1));
    expect(first?.task.id).toBe('a1');
    // One at a time (the SQLite store takes its write transaction per start), and a batch.
    await store.insertTask(keyed('a2', 'a', T0 + 2));
    await store.insertTasks([keyed('a3', 'a', T0 + 3), keyed('a4', 'a', T0 + 3), keyed('b1', 'b', T0 + 3), keyed('b2', 'b', T0 + 3)]);
    expect(await held()).toEqual(['a2', 'a3', 'a4', 'b2']);
    expect(await claimedIds(store, T0 + 4)).toEqual(['b1']);
    expect(await claimedIds(store, T0 + 5)).toEqual([]);

    await complete(store, first!.task, T0 + 6);
    expect(await held()).toEqual(['a3', 'a4', 'b2']);
    expect(await claimedIds(store, T0 + 7)).toEqual(['a2']);
  });

  it('releases `limit` minus leased, and the next when a queued task is cancelled or deleted', async () => {
    const { store, held } = await backend.open();
    const two = { concurrencyLimit: 2 };
    await store.insertTasks(['c1', 'c2', 'c3', 'c4', 'c5', 'c6'].map((id, i) => keyed(id, 'c', T0 + i, two)));
    expect(await held()).toEqual(['c3', 'c4', 'c5', 'c6']);
    const running = await store.claim(claimOf('w', T0 + 10));
    expect(running.map((c) => c.task.id).sort()).toEqual(['c1', 'c2']);
    // Both end in one write each: each releases one place.
    await complete(store, running[0]!.task, T0 + 11);
    expect(await held()).toEqual(['c4', 'c5', 'c6']);
    await complete(store, running[1]!.task, T0 + 12);
    expect(await held()).toEqual(['c5', 'c6']);
    // c3 and c4 stand at the head of the queue; c3 is cancelled before it ran: c5 moves up.
    await cancel(store, (await store.getTask('c3'))!, T0 + 13);
    expect(await held()).toEqual(['c6']);
    await store.deleteTasks({ statuses: ['pending'], ids: ['c4'] }, 10);
    expect(await held()).toEqual([]);
    expect(await claimedIds(store, T0 + 14)).toEqual(['c5', 'c6']);
  });

  it('a leased task deleted gives its place up: the next is released and can be claimed', async () => {
    const { store, held } = await backend.open();
    await store.insertTasks([keyed('d1', 'd'), keyed('d2', 'd', T0 + 1)]);
    expect(await claimedIds(store, T0 + 2)).toEqual(['d1']);
    expect(await store.deleteTasks({ statuses: ['running'], ids: ['d1'] }, 10)).toHaveLength(1);
    expect(await held()).toEqual([]);
    expect(await claimedIds(store, T0 + 3)).toEqual(['d2']);
  });

  it('a start of higher priority goes to the head of the queue unheld; a delayed start is not held', async () => {
    const { store, held } = await backend.open();
    await store.insertTasks([keyed('p1', 'p'), keyed('p2', 'p', T0 + 1)]);
    expect(await held()).toEqual(['p2']);
    // Priority 10 moves p3 ten seconds ahead: before p1, at the head of the key's queue.
    await store.insertTask(keyed('p3', 'p', T0 + 2, { priority: 10 }));
    await store.insertTask(keyed('p4', 'p', T0 + 2, { runAt: T0 + 60_000 }));
    expect(await held()).toEqual(['p2']);
    const [p3] = await store.claim(claimOf('w', T0 + 3));
    expect(p3?.task.id).toBe('p3');
    await complete(store, p3!.task, T0 + 4);
    // p1 is the head again (never held); p2 stays behind it.
    expect(await held()).toEqual(['p2']);
    expect(await claimedIds(store, T0 + 5)).toEqual(['p1']);
  });

  it('the release pass frees a task left held with room in its key, and a released task still waits for its place', async () => {
    const { store, held, raw } = await backend.open();
    await store.insertTasks([keyed('r1', 'r'), keyed('r2', 'r', T0 + 1)]);
    // As if r1 had been started from a snapshot that still saw its key full, while the lease that
    // filled it ended elsewhere: held, with room in its key, and nothing left to release it.
    await raw(`UPDATE $tasks SET held_by_key = $true WHERE id = 'r1'`);
    expect(await held()).toEqual(['r1', 'r2']);
    expect(await claimedIds(store, T0 + 2)).toEqual([]);
    expect(await store.releaseHeld(T0 + 3)).toBe(1);
    expect(await held()).toEqual(['r2']);
    expect(await claimedIds(store, T0 + 4)).toEqual(['r1']);
    expect(await store.releaseHeld(T0 + 5)).toBe(0);
    // Released too early (by hand): the claim's key condition still holds the limit.
    await raw(`UPDATE $tasks SET held_by_key = $false WHERE id = 'r2'`);
    expect(await claimedIds(store, T0 + 6)).toEqual([]);
  });

  it('a worker serving the workflow runs the release pass: a task left held with room in its key still runs', async () => {
    const { url, raw } = await backend.open();
    const wf = workflow('wf', async (ctx) => ctx.step('work', () => 'done'), { concurrency: { key: () => 'only', limit: 1 } });
    const engine = new Engine({ store: url, workflows: [wf] });
    cleanups.push(() => engine.close());
    const task = await engine.start(wf, {});
    await raw(`UPDATE $tasks SET held_by_key = $true WHERE id = '${task.id}'`);
    const worker = engine.worker({ ...FAST });
    await worker.start();
    // Nothing else releases it: only the worker's pass (every few seconds) does.
    expect(await engine.result(task.id, { timeout: '30s' })).toBe('done');
    await worker.stop();
  }, 60_000);
});
