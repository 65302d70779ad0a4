// The Store contract, run against every backend: `STORE=sqlite|postgres|all` (default `all`).
// SQLite gets a temporary file per test; PostgreSQL gets a fresh schema for this file (tests keep
// apart through unique workflow names and task ids), plus fresh schemas for the tests that need an
// empty database (migrations, lease expiry). The PostgreSQL backend is skipped only when the
// server is unreachable (the global setup reports it, and fails instead under CI=true).
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { SqliteStore } from '../src/sqlite/store.ts';
import { PostgresStore } from '../src/postgres/store.ts';
import { postgresMigrations, sqliteMigrations, type Migration } from '../src/generated/sql.ts';
import { sourcesOf, type TaskStatus } from '../src/lifecycle.ts';
import { isStepwiseError } from '../src/errors.ts';
import { planCreation } from '../src/transitions.ts';
import type {
  AlertQuery,
  AlertRow,
  ApprovalRow,
  ClaimRequest,
  ClaimedTask,
  EventRow,
  LogPage,
  NewEvent,
  NewTask,
  SignalRow,
  Store,
  TaskRow,
  TransitionWrite,
  WakeEvent,
  WriteOp,
} from '../src/store.ts';
import { transitionEntry } from '../src/log-entries.ts';
import { PG_URL, dropSchema, freshSchemaName, hasPostgres, withPg } from './support/postgres.ts';
import { stepRow } from './support/rows.ts';

const T0 = 1_700_000_000_000;
const LEASE_MS = 30_000;

const selected = (process.env.STORE ?? 'all').toLowerCase();
if (!['sqlite', 'postgres', 'all'].includes(selected)) throw new Error(`STORE=${selected}: use sqlite, postgres or all`);
const wantSqlite = selected === 'sqlite' || selected === 'all';
const wantPostgres = selected === 'postgres' || selected === 'all';
const postgresUp = wantPostgres && (await hasPostgres());

// ── Backends ─────────────────────────────────────────────────────────────────────────────────

/** A database of its own: open stores on it, and look at its migrations table. */
interface Target {
  open(): Store;
  migrationRows(): Promise<Array<{ id: number; breaking: boolean }>>;
  addMigrationRow(id: number, name: string, breaking: boolean): Promise<void>;
  /** Pretends migration `id` was applied from another text. */
  alterChecksum(id: number): Promise<void>;
}

interface Backend {
  name: 'sqlite' | 'postgres';
  enabled: boolean;
  migrations: readonly Migration[];
  setup(): Promise<void>;
  teardown(): Promise<void>;
  /** The store for one test, migrated. */
  open(): Promise<Store>;
  /** An empty, unmigrated database. */
  isolated(): Target;
}

const opened: Store[] = [];
function track<S extends Store>(store: S): S {
  opened.push(store);
  return store;
}

function sqliteBackend(): Backend {
  let dir = '';
  const target = (path: string): Target => ({
    open: () => track(new SqliteStore(path)),
    async migrationRows() {
      const db = new Database(path, { readonly: true });
      try {
        return (db.prepare('SELECT id, breaking FROM stepwise_migrations ORDER BY id').all() as Array<{ id: number; breaking: number }>).map((r) => ({
          id: r.id,
          breaking: r.breaking === 1,
        }));
      } finally {
        db.close();
      }
    },
    async addMigrationRow(id, name, breaking) {
      const db = new Database(path);
      try {
        db.prepare('INSERT INTO stepwise_migrations (id, name, breaking, applied_at) VALUES (?, ?, ?, ?)').run(id, name, breaking ? 1 : 0, T0);
      } finally {
        db.close();
      }
    },
    async alterChecksum(id) {
      const db = new Database(path);
      try {
        db.prepare(`UPDATE stepwise_migrations SET checksum = 'edited' WHERE id = ?`).run(id);
      } finally {
        db.close();
      }
    },
  });
  const newPath = (): string => join(dir, `${randomBytes(6).toString('hex')}.db`);
  return {
    name: 'sqlite',
    enabled: wantSqlite,
    migrations: sqliteMigrations,
    async setup() {
      dir = mkdtempSync(join(tmpdir(), 'stepwise-conformance-'));
    },
    async teardown() {
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
    async open() {
      const store = target(newPath()).open();
      await store.migrate();
      return store;
    },
    isolated: () => target(newPath()),
  };
}

function postgresBackend(): Backend {
  const schemas: string[] = [];
  const fileSchema = freshSchemaName('sw_conf');
  const target = (schema: string): Target => ({
    open: () => track(new PostgresStore(PG_URL, { schema, poolSize: 4 })),
    migrationRows: () => withPg(async (c) => (await c.query<{ id: number; breaking: boolean }>(`SELECT id, breaking FROM "${schema}".migrations ORDER BY id`)).rows),
    addMigrationRow: (id, name, breaking) =>
      withPg(async (c) => {
        await c.query(`INSERT INTO "${schema}".migrations (id, name, breaking, applied_at) VALUES ($1, $2, $3, $4)`, [id, name, breaking, T0]);
      }),
    alterChecksum: (id) =>
      withPg(async (c) => {
        await c.query(`UPDATE "${schema}".migrations SET checksum = 'edited' WHERE id = $1`, [id]);
      }),
  });
  return {
    name: 'postgres',
    enabled: postgresUp,
    migrations: postgresMigrations,
    async setup() {
      schemas.push(fileSchema);
      const store = target(fileSchema).open();
      await store.migrate();
    },
    async teardown() {
      for (const s of schemas.splice(0)) await dropSchema(s);
    },
    async open() {
      return target(fileSchema).open();
    },
    isolated() {
      const schema = freshSchemaName('sw_conf');
      schemas.push(schema);
      return target(schema);
    },
  };
}

const backends: Backend[] = [];
if (wantSqlite) backends.push(sqliteBackend());
if (wantPostgres) backends.push(postgresBackend());

afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

// ── Helpers ──────────────────────────────────────────────────────────────────────────────────

const CLAIM = { from: sourcesOf('claim'), to: 'running' as TaskStatus };
const RECLAIM = { from: sourcesOf('reclaim'), to: { running: 'running', cancelling: 'cancelling' } as Partial<Record<TaskStatus, TaskStatus>> };

/** Names no other test uses: workflows, task ids (ordered by creation within a test), keys. */
function namespace() {
  const p = randomBytes(4).toString('hex');
  let n = 0;
  return {
    wf: (name = 'main') => `${name}-${p}`,
    id: () => `t-${p}-${String(++n).padStart(4, '0')}`,
    key: (name: string) => `${name}-${p}`,
  };
}
type Namespace = ReturnType<typeof namespace>;

function newTask(ns: Namespace, over: Partial<NewTask> = {}): NewTask {
  return {
    id: ns.id(),
    workflow: ns.wf(),
    workflowVersion: 'v1',
    input: '{"n":1}',
    idempotencyKey: null,
    runAt: T0,
    createdAt: T0,
    ...planCreation({ kind: 'user', id: 'anonymous' }),
    ...over,
  };
}

function claimRequest(ns: Namespace, over: Partial<ClaimRequest> = {}): ClaimRequest {
  return { workerId: 'w1', now: T0, leaseMs: LEASE_MS, limit: 10, workflows: [ns.wf()], claim: CLAIM, reclaim: RECLAIM, ...over };
}

/**
 * A transition from the task's current status, guarded by its current version, with the log entry
 * planTransition would give it (actor: the worker `workerId`, else an anonymous user).
 */
function write(task: TaskRow, over: Partial<TransitionWrite> & Pick<TransitionWrite, 'event' | 'to'>): TransitionWrite {
  const w: Omit<TransitionWrite, 'log'> & { log?: TransitionWrite['log'] } = {
    kind: 'transition',
    taskId: task.id,
    from: [task.status],
    guard: { version: task.version },
    set: {},
    at: T0 + 100,
    ...over,
  };
  const entry = transitionEntry(w.workerId ? 'worker' : 'user', w.workerId ?? 'anonymous', {
    event: w.event,
    from: w.from[0] ?? null,
    to: w.to,
    detail: w.detail ?? null,
    output: w.set.output ?? null,
    error: w.set.error ?? null,
  });
  return { ...w, log: w.log ?? [entry] };
}

/** A task's `transition` entries, flattened: `actor` is `kind:id`, `detail` JSON text or null. */
async function transitions(store: Store, taskId: string) {
  return (await store.getEvents(taskId))
    .filter((e) => e.type === 'transition')
    .map((e) => {
      const d = JSON.parse(e.data ?? '{}') as { event: string; from: string | null; to: string; epoch?: number; detail?: unknown };
      return {
        taskId: e.taskId,
        seq: e.seq,
        at: e.at,
        event: d.event,
        fromStatus: d.from ?? null,
        toStatus: d.to,
        epoch: d.epoch,
        actor: `${e.actorKind}:${e.actorId}`,
        detail: d.detail === undefined || d.detail === null ? null : JSON.stringify(d.detail),
      };
    });
}

/** `seq:type:actor` of each entry of a task's log. */
async function logOf(store: Store, taskId: string): Promise<string[]> {
  return (await store.getEvents(taskId)).map((e: EventRow) => `${e.seq}:${e.type}:${e.actorKind}:${e.actorId}`);
}

/**
 * Leases on PostgreSQL are judged and granted by the database's clock, not by the request's `now`
 * (workers' clocks may disagree; see src/postgres/claim.ts). There, time passing for the leases of
 * `ids` is their expiry moved `ms` into the past; on SQLite the test's later `now` is what makes
 * them expire, and this does nothing.
 */
async function passLeaseTime(store: Store, ids: readonly string[], ms: number): Promise<void> {
  if (!(store instanceof PostgresStore)) return;
  await withPg((c) => c.query(`UPDATE "${store.schema}".tasks SET lease_expires_at = lease_expires_at - $2 WHERE id = ANY($1::text[])`, [ids, ms]));
}

/** Checks that a lease granted at request time `now` for `leaseMs` runs until `now + leaseMs` (on PostgreSQL: the database's now + leaseMs). */
async function expectLease(store: Store, expiresAt: number | null | undefined, now: number, leaseMs = LEASE_MS): Promise<void> {
  if (!(store instanceof PostgresStore)) {
    expect(expiresAt).toBe(now + leaseMs);
    return;
  }
  const [row] = await withPg(async (c) => (await c.query<{ db: string }>('SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS db')).rows);
  const dbNow = Number(row?.db);
  expect(expiresAt).toBeLessThanOrEqual(dbNow + leaseMs);
  expect(expiresAt).toBeGreaterThan(dbNow + leaseMs - 60_000); // granted during this test, from the database's clock
}

async function mustGet(store: Store, id: string): Promise<TaskRow> {
  const task = await store.getTask(id);
  if (!task) throw new Error(`task ${id} not found`);
  return task;
}

/** Creates a task and claims it; returns the claimed row. */
async function claimedTask(store: Store, ns: Namespace, over: Partial<NewTask> = {}, workerId = 'w1'): Promise<TaskRow> {
  const { task } = await store.insertTask(newTask(ns, over));
  const claimed = await store.claim(claimRequest(ns, { workerId, workflows: [task.workflow], limit: 1 }));
  const mine = claimed.find((c) => c.task.id === task.id);
  if (!mine) throw new Error(`task ${task.id} was not claimed`);
  return mine.task;
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// ── The contract ─────────────────────────────────────────────────────────────────────────────

for (const backend of backends) {
  describe.skipIf(!backend.enabled)(`Store contract on ${backend.name}`, () => {
    let store: Store;
    let ns: Namespace;

    beforeAll(() => backend.setup());
    afterAll(() => backend.teardown());
    beforeEach(async () => {
      store = await backend.open();
      ns = namespace();
    });

    describe('run events and stream chunks (stepwise-engine/ai)', () => {
      it("appendRunEvents appends after the task log and sets its usage, only for the lease holder's epoch", async () => {
        const task = await claimedTask(store, ns);
        const before = (await store.getEvents(task.id)).length;
        const entry = { type: 'usage:attempt', actorKind: 'worker' as const, actorId: 'w1', data: '{"step":"a","attempt":1}' };
        expect(await store.appendRunEvents({ taskId: task.id, epoch: task.epoch, at: 5, events: [entry, entry], usage: '{"n":1}' })).toBe(true);
        // A write quoting another epoch (a zombie) changes nothing.
        expect(await store.appendRunEvents({ taskId: task.id, epoch: task.epoch + 1, at: 6, events: [entry], usage: '{"n":2}' })).toBe(false);
        // No entries, only the usage column.
        expect(await store.appendRunEvents({ taskId: task.id, epoch: task.epoch, at: 7, events: [], usage: '{"n":3}' })).toBe(true);
        const events = await store.getEvents(task.id);
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
        expect(events.slice(before).map((e) => [e.type, e.at, e.data])).toEqual([
          ['usage:attempt', 5, entry.data],
          ['usage:attempt', 5, entry.data],
        ]);
        expect((await mustGet(store, task.id)).usage).toBe('{"n":3}');
      });

      it('a task starts with the usage it is inserted with', async () => {
        const { task } = await store.insertTask(newTask(ns, { usage: '{"budget":{"tokens":5}}' }));
        expect((await mustGet(store, task.id)).usage).toBe('{"budget":{"tokens":5}}');
      });

      it('stream chunks are written only by the lease holder, read in order after an id, and deleted per step', async () => {
        const task = await claimedTask(store, ns);
        const chunk = (step: string, delta: string, kind: 'delta' | 'reset' = 'delta') => ({ step, attempt: kind === 'reset' ? 2 : 1, kind, delta, at: 1 });
        expect(await store.appendChunks({ taskId: task.id, epoch: task.epoch, chunks: [chunk('a', 'x'), chunk('b', 'y')] })).toBe(true);
        expect(await store.appendChunks({ taskId: task.id, epoch: task.epoch, chunks: [chunk('a', '', 'reset'), chunk('a', 'z')] })).toBe(true);
        expect(await store.appendChunks({ taskId: task.id, epoch: task.epoch + 1, chunks: [chunk('a', 'zombie')] })).toBe(false);
        const all = await store.getChunks(task.id, 0, 100);
        expect(all.map((c) => [c.step, c.kind, c.delta, c.attempt])).toEqual([
          ['a', 'delta', 'x', 1],
          ['b', 'delta', 'y', 1],
          ['a', 'reset', '', 2],
          ['a', 'delta', 'z', 1],
        ]);
        expect(all.map((c) => c.id)).toEqual([...all.map((c) => c.id)].sort((x, y) => x - y));
        expect((await store.getChunks(task.id, (all[1] as { id: number }).id, 100)).map((c) => c.delta)).toEqual(['', 'z']);
        await store.deleteChunks(task.id, 'a');
        expect((await store.getChunks(task.id, 0, 100)).map((c) => c.step)).toEqual(['b']);
      });

      it('stream chunks of tasks that ended at or before a time are purged, in batches; a live task keeps its chunks', async () => {
        const ended = await claimedTask(store, ns);
        const live = await claimedTask(store, ns);
        const chunk = (delta: string) => ({ step: 's', attempt: 1, kind: 'delta' as const, delta, at: 1 });
        for (const t of [ended, live]) expect(await store.appendChunks({ taskId: t.id, epoch: t.epoch, chunks: [chunk('a'), chunk('b'), chunk('c')] })).toBe(true);
        await store.transition(write(ended, { event: 'complete', to: 'succeeded', guard: { epoch: ended.epoch }, set: { clearLease: true, output: '1', finishedAt: T0 + 100 } }));
        // Ended after the cut-off: kept.
        expect(await store.purgeChunks(T0 + 99, 10)).toBe(0);
        expect(await store.purgeChunks(T0 + 100, 2)).toBe(2);
        expect(await store.purgeChunks(T0 + 100, 10)).toBe(1);
        expect(await store.getChunks(ended.id, 0, 10)).toEqual([]);
        expect((await store.getChunks(live.id, 0, 10)).map((c) => c.delta)).toEqual(['a', 'b', 'c']);
      });
    });

    describe('migrations', () => {
      it('migrate is idempotent: running it again applies nothing and keeps the data', async () => {
        const target = backend.isolated();
        const s = target.open();
        await s.migrate();
        const { task } = await s.insertTask(newTask(ns));
        await s.migrate();
        expect(await target.migrationRows()).toEqual(backend.migrations.map((m) => ({ id: m.id, breaking: m.breaking })));
        expect((await s.getTask(task.id))?.id).toBe(task.id);
      });

      it('two stores migrating the same database at once both succeed and apply each migration once', async () => {
        const target = backend.isolated();
        const a = target.open();
        const b = target.open();
        await Promise.all([a.migrate(), b.migrate()]);
        expect(await target.migrationRows()).toEqual(backend.migrations.map((m) => ({ id: m.id, breaking: m.breaking })));
        const { task } = await a.insertTask(newTask(ns));
        expect((await b.getTask(task.id))?.id).toBe(task.id);
      });

      it('a database with an unknown breaking migration is refused with SchemaMismatchError', async () => {
        const target = backend.isolated();
        await target.open().migrate();
        await target.addMigrationRow(900, 'from_the_future', true);
        const err = await target
          .open()
          .migrate()
          .then(
            () => null,
            (e: unknown) => e,
          );
        expect(isStepwiseError(err, 'SCHEMA_MISMATCH')).toBe(true);
        expect((err as Error).message).toContain('900');
      });

      it('a database whose applied migration differs from the shipped text is refused with SchemaMismatchError', async () => {
        const target = backend.isolated();
        await target.open().migrate();
        await target.alterChecksum(1);
        const err = await target
          .open()
          .migrate()
          .then(
            () => null,
            (e: unknown) => e,
          );
        expect(isStepwiseError(err, 'SCHEMA_MISMATCH')).toBe(true);
        expect((err as Error).message).toMatch(/migration 1 \(init\) applied from a different text/);
      });

      it('a database with an unknown non-breaking migration is accepted', async () => {
        const target = backend.isolated();
        await target.open().migrate();
        await target.addMigrationRow(900, 'additive', false);
        await expect(target.open().migrate()).resolves.toBeUndefined();
      });
    });

    describe('tasks', () => {
      it('insertTask creates a pending task at version 1, epoch 0, with a create log entry', async () => {
        const input = newTask(ns, { idempotencyKey: ns.key('k'), runAt: T0 + 5 });
        const { task, created } = await store.insertTask(input);
        expect(created).toBe(true);
        expect(task).toEqual({
          id: input.id,
          workflow: input.workflow,
          workflowVersion: 'v1',
          status: 'pending',
          input: '{"n":1}',
          output: null,
          error: null,
          idempotencyKey: input.idempotencyKey,
          runAt: T0 + 5,
          leaseOwner: null,
          leaseExpiresAt: null,
          epoch: 0,
          version: 1,
          runs: 0,
          retries: 0,
          pauseRequested: false,
          wait: null,
          waitEvents: null,
          cancelReason: null,
          createdAt: T0,
          updatedAt: T0,
          finishedAt: null,
          progress: null,
          usage: null,
          deadlineAt: null,
          hasCleanup: false,
          redo: null,
          title: null,
          debounceKey: null,
          singletonKey: null,
          concurrencyKey: null,
          concurrencyLimit: null,
          priority: 0,
          heldByKey: false,
          parentId: null,
          rootId: null,
          depth: 0,
          tags: null,
          forkedFrom: null,
          undoFrom: null,
        });
        expect(await store.getTask(input.id)).toEqual(task);
        const history = await transitions(store, input.id);
        expect(history).toHaveLength(1);
        expect(history[0]).toMatchObject({ taskId: input.id, seq: 1, at: T0, event: 'create', fromStatus: null, toStatus: 'pending', actor: 'user:anonymous', detail: null });
      });

      it('insertTasks keeps every text as it was given: quotes, backslashes, braces, commas, NULL-like words, empty strings and non-ASCII', async () => {
        const texts = ['{"a":"b\\"c"}', 'back\\slash', '{1,2}', 'a,b', 'NULL', '', 'ünï 😀 "q"', ' lead and trail '];
        const tasks = texts.map((text) => newTask(ns, { input: JSON.stringify(text), title: text === '' ? null : text }));
        const created = await store.insertTasks(tasks);
        for (const [k, t] of tasks.entries()) {
          expect(created[k]?.task.input).toBe(JSON.stringify(texts[k]));
          expect((await mustGet(store, t.id)).input).toBe(JSON.stringify(texts[k]));
          expect((await mustGet(store, t.id)).title).toBe(texts[k] === '' ? null : texts[k]);
        }
      });

      it('insertTask keeps the deadline', async () => {
        const input = newTask(ns, { deadlineAt: T0 + 3_600_000 });
        const { task } = await store.insertTask(input);
        expect(task.deadlineAt).toBe(T0 + 3_600_000);
        expect((await store.getTask(input.id))?.deadlineAt).toBe(T0 + 3_600_000);
      });

      it('insertTask with an existing idempotency key returns the existing task and writes nothing', async () => {
        const key = ns.key('article');
        const first = await store.insertTask(newTask(ns, { idempotencyKey: key }));
        const second = await store.insertTask(newTask(ns, { idempotencyKey: key, input: '{"n":2}' }));
        expect(second.created).toBe(false);
        expect(second.task).toEqual(first.task);
        expect(await store.findTaskByKey(key)).toEqual(first.task);
        expect(await store.listTasks({ workflow: ns.wf(), limit: 10 })).toHaveLength(1);
        expect(await transitions(store, first.task.id)).toHaveLength(1);
      });

      it('concurrent inserts with one idempotency key create one task', async () => {
        const key = ns.key('race');
        const results = await Promise.all(Array.from({ length: 8 }, () => store.insertTask(newTask(ns, { idempotencyKey: key }))));
        expect(results.filter((r) => r.created)).toHaveLength(1);
        expect(new Set(results.map((r) => r.task.id)).size).toBe(1);
      });

      it('tasks without an idempotency key never collide', async () => {
        const a = await store.insertTask(newTask(ns));
        const b = await store.insertTask(newTask(ns));
        expect([a.created, b.created]).toEqual([true, true]);
      });

      it('getTask and findTaskByKey return null for unknown ids and keys; reads of unknown tasks are empty', async () => {
        expect(await store.getTask(ns.id())).toBeNull();
        expect(await store.findTaskByKey(ns.key('nope'))).toBeNull();
        expect(await store.getSteps(ns.id())).toEqual([]);
        expect(await store.getEvents(ns.id())).toEqual([]);
        expect(await store.getSignals(ns.id())).toEqual([]);
      });

      it('getTasks returns the tasks of the ids that exist, each once, the unknown ids left out', async () => {
        const a = (await store.insertTask(newTask(ns))).task;
        const b = (await store.insertTask(newTask(ns))).task;
        const get = store.getTasks as NonNullable<Store['getTasks']>;
        const found = await get.call(store, [b.id, ns.id(), a.id, b.id]);
        expect(found.sort((x, y) => x.id.localeCompare(y.id))).toEqual([a, b].sort((x, y) => x.id.localeCompare(y.id)));
        expect(await get.call(store, [])).toEqual([]);
        expect(await get.call(store, [ns.id()])).toEqual([]);
      });

      it('listTasks lists newest first, filters by status and workflow, and pages with a before cursor', async () => {
        const ids: string[] = [];
        for (let i = 0; i < 5; i++) ids.push((await store.insertTask(newTask(ns))).task.id);
        const other = (await store.insertTask(newTask(ns, { workflow: ns.wf('other') }))).task.id;
        await store.claim(claimRequest(ns, { limit: 2 })); // the two oldest: ids[0], ids[1]
        const newestFirst = [...ids].reverse();

        expect((await store.listTasks({ workflow: ns.wf(), limit: 10 })).map((t) => t.id)).toEqual(newestFirst);
        expect((await store.listTasks({ workflow: ns.wf(), statuses: ['running'], limit: 10 })).map((t) => t.id)).toEqual([ids[1], ids[0]]);
        expect((await store.listTasks({ workflow: ns.wf(), statuses: ['pending', 'running'], limit: 10 })).map((t) => t.id)).toEqual(newestFirst);
        expect((await store.listTasks({ workflow: ns.wf('other'), limit: 10 })).map((t) => t.id)).toEqual([other]);

        const pages: string[][] = [];
        let before: string | undefined;
        for (;;) {
          const page = await store.listTasks({ workflow: ns.wf(), limit: 2, ...(before === undefined ? {} : { before }) });
          if (!page.length) break;
          pages.push(page.map((t) => t.id));
          before = page[page.length - 1]?.id;
        }
        expect(pages).toEqual([newestFirst.slice(0, 2), newestFirst.slice(2, 4), newestFirst.slice(4)]);
      });

      it('setTags merges and removes tags in the row and the index; refuses more than max; with an epoch only for the lease holder', async () => {
        const { task } = await store.insertTask(newTask(ns, { tags: { tenant: 'acme' } }));
        const byTag = async (key: string, value: string): Promise<string[]> => (await store.listTasks({ tags: [[key, value]], limit: 10 })).map((t) => t.id);
        expect(await byTag('tenant', 'acme')).toEqual([task.id]);
        expect(await store.setTags(task.id, { set: { tenant: 'globex', user: 'u1' }, remove: [], max: 32 })).toEqual({ tenant: 'globex', user: 'u1' });
        expect(await byTag('tenant', 'acme')).toEqual([]);
        expect(await byTag('tenant', 'globex')).toEqual([task.id]);
        expect(await store.setTags(task.id, { set: {}, remove: ['user'], max: 32 })).toEqual({ tenant: 'globex' });
        expect(await byTag('user', 'u1')).toEqual([]);
        expect(await store.setTags(task.id, { set: { a: '1', b: '2' }, remove: [], max: 2 })).toBe('too-many');
        expect((await store.getTask(task.id))?.tags).toBe('{"tenant":"globex"}');
        // A run's change: only at the lease's epoch.
        expect(await store.setTags(task.id, { set: { x: '1' }, remove: [], epoch: 0, max: 32 })).toBeNull();
        expect(await store.setTags(ns.id(), { set: { x: '1' }, remove: [], max: 32 })).toBeNull();
        const claimed = await claimedTask(store, ns, { workflow: ns.wf('tagged'), tags: { k: 'v' } });
        expect(await store.setTags(claimed.id, { set: { x: '1' }, remove: [], epoch: claimed.epoch, max: 32 })).toEqual({ k: 'v', x: '1' });
        expect(await store.setTags(claimed.id, { set: { y: '1' }, remove: [], epoch: claimed.epoch + 1, max: 32 })).toBeNull();
      });

      it('forkTask creates the task with copies of the chosen journal rows (epoch 0, no log entry) in one write', async () => {
        const source = await claimedTask(store, ns);
        const rows = [0, 1, 2].map((seq) => stepRow(source.id, seq, source.epoch));
        expect(await store.writeBatch(rows.map((step) => ({ kind: 'step' as const, taskId: source.id, epoch: source.epoch, step })))).toEqual([true, true, true]);
        const fork = newTask(ns, { forkedFrom: source.id, tags: { experiment: 'x' } });
        const row = await store.forkTask({ ...fork, forkedFrom: source.id }, [0, 1]);
        expect(row).toMatchObject({ id: fork.id, status: 'pending', forkedFrom: source.id, tags: '{"experiment":"x"}' });
        const copied = await store.getSteps(fork.id);
        expect(copied.map((s) => [s.seq, s.name, s.epoch, s.output])).toEqual([
          [0, 's0', 0, rows[0]?.output],
          [1, 's1', 0, rows[1]?.output],
        ]);
        // The fork's log is its own creation entry only; the source keeps its rows.
        expect((await store.getEvents(fork.id)).map((e) => e.seq)).toEqual([1]);
        expect((await store.getSteps(source.id)).length).toBe(3);
        expect((await store.listTasks({ tags: [['experiment', 'x']], limit: 10 })).map((t) => t.id)).toEqual([fork.id]);
      });
    });

    describe('transitions', () => {
      it('a transition from a status not in `from` is refused: no change, no log entry', async () => {
        const { task } = await store.insertTask(newTask(ns));
        const result = await store.transition(write(task, { event: 'abort', from: ['cancelling'], to: 'cancelled', set: { finishedAt: T0 + 100 } }));
        expect(result).toBeNull();
        expect(await store.getTask(task.id)).toEqual(task);
        expect(await transitions(store, task.id)).toHaveLength(1);
      });

      it('a transition with a stale version is refused: no change, no log entry', async () => {
        const { task } = await store.insertTask(newTask(ns));
        const paused = await store.transition(write(task, { event: 'pause', to: 'paused' }));
        expect(paused?.version).toBe(2);
        const stale = await store.transition(write(task, { event: 'cancel', from: ['paused'], to: 'cancelled' }));
        expect(stale).toBeNull();
        expect(await store.getTask(task.id)).toEqual(paused);
        expect((await transitions(store, task.id)).map((h) => h.event)).toEqual(['create', 'pause']);
      });

      it('a transition with a stale epoch is refused: no change, no log entry', async () => {
        const task = await claimedTask(store, ns);
        const refused = await store.transition(write(task, { event: 'complete', to: 'succeeded', guard: { epoch: task.epoch - 1 }, set: { output: '1' } }));
        expect(refused).toBeNull();
        expect(await store.getTask(task.id)).toEqual(task);
        expect((await transitions(store, task.id)).map((h) => h.event)).toEqual(['create', 'claim']);
      });

      it('the pauseRequested guard refuses a transition when the pause request is in the other state', async () => {
        const task = await claimedTask(store, ns);
        const refused = await store.transition(write(task, { event: 'resume', to: 'running', pauseRequested: true, set: { pauseRequested: false } }));
        expect(refused).toBeNull();
        const requested = await store.transition(write(task, { event: 'pause', to: 'running', pauseRequested: false, set: { pauseRequested: true } }));
        expect(requested?.pauseRequested).toBe(true);
        if (!requested) throw new Error('unreachable');
        const again = await store.transition(write(requested, { event: 'pause', to: 'running', pauseRequested: false, set: { pauseRequested: true } }));
        expect(again).toBeNull();
        const suspended = await store.transition(
          write(requested, { event: 'suspend', to: 'paused', guard: { epoch: task.epoch }, pauseRequested: true, set: { pauseRequested: false, clearLease: true } }),
        );
        expect(suspended).toMatchObject({ status: 'paused', pauseRequested: false, leaseOwner: null, leaseExpiresAt: null });
        expect((await transitions(store, task.id)).map((h) => h.event)).toEqual(['create', 'claim', 'pause', 'suspend']);
      });

      it('an accepted transition bumps the version, applies the patch and appends one log entry with the previous status and epoch', async () => {
        const task = await claimedTask(store, ns);
        const failed = await store.transition(
          write(task, {
            event: 'fail',
            to: 'failed',
            guard: { epoch: task.epoch },
            at: T0 + 200,
            workerId: 'w1',
            detail: '{"why":"boom"}',
            set: { error: '{"message":"boom"}', clearLease: true, finishedAt: T0 + 200, cancelReason: null },
          }),
        );
        expect(failed).toEqual({
          ...task,
          status: 'failed',
          error: '{"message":"boom"}',
          leaseOwner: null,
          leaseExpiresAt: null,
          finishedAt: T0 + 200,
          version: task.version + 1,
          updatedAt: T0 + 200,
        });
        expect(await store.getTask(task.id)).toEqual(failed);
        const history = await transitions(store, task.id);
        expect(history).toHaveLength(3);
        expect(history[2]).toMatchObject({ seq: 3, event: 'fail', fromStatus: 'running', toStatus: 'failed', at: T0 + 200, actor: 'worker:w1', detail: '{"why":"boom"}' });
        if (!failed) throw new Error('unreachable');

        const retried = await store.transition(
          write(failed, { event: 'retry', to: 'pending', at: T0 + 300, set: { runAt: T0 + 300, incrementRetries: true, error: null, finishedAt: null } }),
        );
        expect(retried).toMatchObject({ status: 'pending', retries: 1, runAt: T0 + 300, error: null, finishedAt: null, version: task.version + 2, epoch: task.epoch });
        expect((await transitions(store, task.id))[3]).toMatchObject({ seq: 4, event: 'retry', fromStatus: 'failed', toStatus: 'pending', actor: 'user:anonymous', detail: null });
      });

      it('concurrent transitions with the same version guard: exactly one is accepted', async () => {
        const { task } = await store.insertTask(newTask(ns));
        const results = await Promise.all(Array.from({ length: 8 }, () => store.transition(write(task, { event: 'pause', to: 'paused' }))));
        expect(results.filter((r) => r !== null)).toHaveLength(1);
        expect((await transitions(store, task.id)).map((h) => h.event)).toEqual(['create', 'pause']);
        expect((await mustGet(store, task.id)).version).toBe(2);
      });

      it('an accepted transition upserts its steps and consumes its signals in the same write; a refused one does neither', async () => {
        const task = await claimedTask(store, ns);
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch, { status: 'retrying', output: null }) }])).toEqual([true]);
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'go', payload: '"a"', idempotencyKey: null, at: T0 + 10 });
        const [signal] = await store.getSignals(task.id);
        if (!signal) throw new Error('no signal');

        const refused = await store.transition(
          write(task, {
            event: 'park',
            to: 'waiting',
            guard: { epoch: task.epoch + 1 },
            set: { clearLease: true },
            steps: [stepRow(task.id, 0, task.epoch), stepRow(task.id, 1, task.epoch)],
            consume: [{ signalId: signal.id, seq: 1 }],
          }),
        );
        expect(refused).toBeNull();
        expect((await store.getSteps(task.id)).map((s) => s.status)).toEqual(['retrying']);
        expect((await store.getSignals(task.id))[0]?.consumedSeq).toBeNull();

        const parked = await store.transition(
          write(task, {
            event: 'park',
            to: 'waiting',
            guard: { epoch: task.epoch },
            set: { clearLease: true, runAt: T0 + 5000, wait: '{"sleep":"s2"}' },
            steps: [
              stepRow(task.id, 0, task.epoch),
              stepRow(task.id, 1, task.epoch, { kind: 'event', output: '"a"' }),
              stepRow(task.id, 2, task.epoch, { kind: 'sleep', status: 'waiting', output: null, wakeAt: T0 + 5000 }),
            ],
            consume: [{ signalId: signal.id, seq: 1 }],
          }),
        );
        expect(parked).toMatchObject({ status: 'waiting', runAt: T0 + 5000, wait: '{"sleep":"s2"}', leaseOwner: null });
        expect(await store.pendingSignals(task.id, 0)).toEqual([]); // consumed: no longer pending
        expect(await store.getSteps(task.id)).toEqual([
          stepRow(task.id, 0, task.epoch),
          stepRow(task.id, 1, task.epoch, { kind: 'event', output: '"a"' }),
          stepRow(task.id, 2, task.epoch, { kind: 'sleep', status: 'waiting', output: null, wakeAt: T0 + 5000 }),
        ]);
        expect((await store.getSignals(task.id))[0]?.consumedSeq).toBe(1);
      });

      it('a task waiting for several events is made due by a signal of any of them, and by none other', async () => {
        const task = await claimedTask(store, ns);
        await store.transition(
          write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: ['approve', 'reject'] } }),
        );
        expect(await mustGet(store, task.id)).toMatchObject({ waitEvents: ['approve', 'reject'], runAt: null });
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'approv', payload: null, idempotencyKey: null, at: T0 + 200 });
        expect((await mustGet(store, task.id)).runAt).toBeNull(); // a prefix is not a match
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'reject', payload: null, idempotencyKey: null, at: T0 + 300 });
        expect((await mustGet(store, task.id)).runAt).toBe(T0 + 300);
      });

      it('getSignalByKey finds the signal of a task recorded with a key, and nothing for another key or task; pendingSignals lists the unconsumed ones after an id', async () => {
        const task = await claimedTask(store, ns);
        const other = await claimedTask(store, ns);
        const sig = (taskId: string, name: string, idempotencyKey: string | null) =>
          store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId, name, payload: '{"n":1}', idempotencyKey, at: T0 + 10 });
        await sig(task.id, 'a', null);
        await sig(task.id, 'b', 'k-1');
        await sig(other.id, 'c', 'k-2');
        expect(await store.getSignalByKey(task.id, 'k-1')).toMatchObject({ taskId: task.id, name: 'b', idempotencyKey: 'k-1', payload: '{"n":1}' });
        expect(await store.getSignalByKey(task.id, 'k-2')).toBeUndefined();
        expect(await store.getSignalByKey(other.id, 'k-2')).toMatchObject({ name: 'c' });
        // pendingSignals: the unconsumed ones after an id, in order.
        const pending = await store.pendingSignals(task.id, 0);
        expect(pending.map((x) => x.name)).toEqual(['a', 'b']);
        expect((await store.pendingSignals(task.id, pending[0]?.id ?? 0)).map((x) => x.name)).toEqual(['b']);
      });

      it('setting waitEvents makes the task due at once when a matching signal already waits, and not otherwise', async () => {
        const early = await claimedTask(store, ns);
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: early.id, name: 'approved', payload: null, idempotencyKey: null, at: T0 + 50 });
        expect((await mustGet(store, early.id)).runAt).toBe(T0); // not waiting yet: nothing changes
        await store.transition(write(early, { event: 'park', to: 'waiting', guard: { epoch: early.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: ['approved'] } }));
        expect(await mustGet(store, early.id)).toMatchObject({ status: 'waiting', waitEvents: ['approved'], runAt: T0 + 100 });

        const other = await claimedTask(store, ns);
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: other.id, name: 'something-else', payload: null, idempotencyKey: null, at: T0 + 50 });
        await store.transition(write(other, { event: 'park', to: 'waiting', guard: { epoch: other.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: ['approved'] } }));
        expect(await mustGet(store, other.id)).toMatchObject({ status: 'waiting', waitEvents: ['approved'], runAt: null });
      });

      it("insertTask keeps a child task's parent, root and depth; listTasks({ parent }) lists only that parent's children", async () => {
        const parent = (await store.insertTask(newTask(ns))).task;
        const a = (await store.insertTask(newTask(ns, { parentId: parent.id, rootId: parent.id, depth: 1 }))).task;
        const b = (await store.insertTask(newTask(ns, { parentId: a.id, rootId: parent.id, depth: 2 }))).task;
        expect(a).toMatchObject({ parentId: parent.id, rootId: parent.id, depth: 1 });
        expect(await mustGet(store, b.id)).toMatchObject({ parentId: a.id, rootId: parent.id, depth: 2 });
        expect((await store.listTasks({ parent: parent.id, limit: 10 })).map((t) => t.id)).toEqual([a.id]);
        expect((await store.listTasks({ parent: a.id, limit: 10 })).map((t) => t.id)).toEqual([b.id]);
        expect(await store.listTasks({ parent: b.id, limit: 10 })).toEqual([]);
      });

      it('a transition that finishes a child records its end as a signal to the parent in the same write and makes the waiting parent due, once', async () => {
        const parent = await claimedTask(store, ns);
        const name = `child:${ns.id()}`;
        await store.transition(write(parent, { event: 'park', to: 'waiting', guard: { epoch: parent.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: [name] } }));
        const child = await claimedTask(store, ns, { parentId: parent.id, rootId: parent.id, depth: 1 });
        const end = (at: number) =>
          write(child, {
            event: 'complete',
            to: 'succeeded',
            guard: { epoch: child.epoch },
            at,
            set: { clearLease: true, output: '{"n":2}', finishedAt: at },
            parentSignal: { taskId: parent.id, name },
          });
        // Through a batch with another end (PostgreSQL groups end-of-run transitions): the signal goes with it.
        const other = await claimedTask(store, ns);
        const otherEnd = write(other, { event: 'complete', to: 'succeeded', guard: { epoch: other.epoch }, at: T0 + 200, set: { clearLease: true, output: 'null', finishedAt: T0 + 200 } });
        const [done, otherDone] = await store.writeBatch([end(T0 + 200), otherEnd]);
        expect(done).toMatchObject({ status: 'succeeded' });
        expect(otherDone).toMatchObject({ status: 'succeeded' });
        expect(await store.getSignals(other.id)).toEqual([]);
        const signals = await store.getSignals(parent.id);
        expect(signals.map((s) => [s.name, JSON.parse(s.payload as string), s.idempotencyKey])).toEqual([[name, { status: 'succeeded', output: { n: 2 }, error: null }, name]]);
        expect(await mustGet(store, parent.id)).toMatchObject({ status: 'waiting', runAt: T0 + 200 });
        const received = (await store.getEvents(parent.id)).filter((e) => e.type === 'signal:received');
        expect(received.map((e) => [e.actorKind, e.actorId])).toEqual([['system', `task:${child.id}`]]);
        // A write the guard refuses sends nothing.
        expect(await store.transition(end(T0 + 300))).toBeNull();
        expect(await store.getSignals(parent.id)).toHaveLength(1);
      });

      it("the ends of many children in one batch each reach their parent once, numbered in the parent's log without gaps, and wake only a parent that waits for one of them", async () => {
        // Two parents: `a` waits for its second child's end, `b` waits for nothing yet. A third task
        // ends in the same batch as its own child (the child's signal to it cannot share a statement with it).
        const a = await claimedTask(store, ns);
        const b = await claimedTask(store, ns);
        const kidsA = [
          await claimedTask(store, ns, { parentId: a.id, rootId: a.id, depth: 1 }),
          await claimedTask(store, ns, { parentId: a.id, rootId: a.id, depth: 1 }),
          await claimedTask(store, ns, { parentId: a.id, rootId: a.id, depth: 1 }),
        ];
        const kidB = await claimedTask(store, ns, { parentId: b.id, rootId: b.id, depth: 1 });
        const waited = `child:${(kidsA[1] as TaskRow).id}`;
        await store.transition(write(a, { event: 'park', to: 'waiting', guard: { epoch: a.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: [waited] } }));
        await store.transition(write(b, { event: 'park', to: 'waiting', guard: { epoch: b.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null } }));
        const mid = await claimedTask(store, ns);
        const kidMid = await claimedTask(store, ns, { parentId: mid.id, rootId: mid.id, depth: 1 });
        const logBefore = { a: (await logOf(store, a.id)).length, b: (await logOf(store, b.id)).length };
        const end = (child: TaskRow, to: 'succeeded' | 'failed', at: number, parentId: string): TransitionWrite =>
          write(child, {
            event: to === 'succeeded' ? 'complete' : 'fail',
            to,
            guard: { epoch: child.epoch },
            at,
            set:
              to === 'succeeded'
                ? { clearLease: true, output: `{"child":${JSON.stringify(child.id)}}`, finishedAt: at }
                : { clearLease: true, error: '{"code":"BOOM","message":"no"}', finishedAt: at },
            parentSignal: { taskId: parentId, name: `child:${child.id}` },
          });
        const stale = { ...end(kidsA[2] as TaskRow, 'succeeded', T0 + 200, a.id), guard: { epoch: (kidsA[2] as TaskRow).epoch + 1 } };
        const results = await store.writeBatch([
          end(kidsA[0] as TaskRow, 'succeeded', T0 + 240, a.id), // later than the end `a` waits for: not its due time
          end(kidMid, 'succeeded', T0 + 200, mid.id),
          end(kidB, 'failed', T0 + 210, b.id),
          write(mid, { event: 'complete', to: 'succeeded', guard: { epoch: mid.epoch }, at: T0 + 220, set: { clearLease: true, output: '1', finishedAt: T0 + 220 } }),
          end(kidsA[1] as TaskRow, 'succeeded', T0 + 230, a.id),
          stale, // refused by its guard: no signal
        ]);
        expect(results.map((r) => (r as TaskRow | null)?.status ?? null)).toEqual(['succeeded', 'succeeded', 'failed', 'succeeded', 'succeeded', null]);

        const signalsOf = async (id: string) => (await store.getSignals(id)).map((s) => [s.name, JSON.parse(s.payload as string), s.idempotencyKey, s.consumedSeq]);
        expect(await signalsOf(a.id)).toEqual([
          [`child:${(kidsA[0] as TaskRow).id}`, { status: 'succeeded', output: { child: (kidsA[0] as TaskRow).id }, error: null }, `child:${(kidsA[0] as TaskRow).id}`, null],
          [waited, { status: 'succeeded', output: { child: (kidsA[1] as TaskRow).id }, error: null }, waited, null],
        ]);
        expect(await signalsOf(b.id)).toEqual([[`child:${kidB.id}`, { status: 'failed', output: null, error: { code: 'BOOM', message: 'no' } }, `child:${kidB.id}`, null]]);
        expect(await signalsOf(mid.id)).toEqual([[`child:${kidMid.id}`, { status: 'succeeded', output: { child: kidMid.id }, error: null }, `child:${kidMid.id}`, null]]);
        // `a` waited for one of its signals: due at that end's time (not its other child's, later); `b` waited for none: not due.
        expect(await mustGet(store, a.id)).toMatchObject({ status: 'waiting', runAt: T0 + 230 });
        expect(await mustGet(store, b.id)).toMatchObject({ status: 'waiting', runAt: null });
        // Each parent's log: its entries before, then one `signal:received` per new signal, numbered on without a gap, each naming its signal and child.
        for (const [parent, kids] of [
          [a, [kidsA[0], kidsA[1]]],
          [b, [kidB]],
        ] as Array<[TaskRow, TaskRow[]]>) {
          const log = await store.getEvents(parent.id);
          expect(log.map((e) => e.seq)).toEqual(log.map((_e, i) => i + 1));
          const received = log.filter((e) => e.type === 'signal:received');
          expect(received.map((e) => e.seq)).toEqual(kids.map((_k, i) => logBefore[parent === a ? 'a' : 'b'] + i + 1));
          const signals = await store.getSignals(parent.id);
          expect(received.map((e) => [e.actorKind, e.actorId, JSON.parse(e.data as string)])).toEqual(
            kids.map((k, i) => [
              'system',
              `task:${k.id}`,
              { signalId: (signals[i] as SignalRow).id, name: `child:${k.id}`, payload: JSON.parse((signals[i] as SignalRow).payload as string), idempotencyKey: `child:${k.id}` },
            ]),
          );
        }
        const midLog = await store.getEvents(mid.id);
        expect(midLog.map((e) => e.seq)).toEqual(midLog.map((_e, i) => i + 1));
        expect(midLog.filter((e) => e.type === 'signal:received')).toHaveLength(1);
        // The refused end left its child leased and wrote nothing to the parent; sent again at its epoch, it reaches the parent once.
        expect(await mustGet(store, (kidsA[2] as TaskRow).id)).toMatchObject({ status: 'running' });
        const [late] = await store.writeBatch([
          end(kidsA[2] as TaskRow, 'succeeded', T0 + 300, a.id),
          write(b, { event: 'cancel', to: 'cancelled', guard: { version: (await mustGet(store, b.id)).version }, at: T0 + 300, set: {} }),
        ]);
        expect(late).toMatchObject({ status: 'succeeded' });
        expect((await store.getSignals(a.id)).map((s) => s.name)).toEqual([`child:${(kidsA[0] as TaskRow).id}`, waited, `child:${(kidsA[2] as TaskRow).id}`]);
        const aLog = await store.getEvents(a.id);
        expect(aLog.map((e) => e.seq)).toEqual(aLog.map((_e, i) => i + 1));
      });
    });

    describe('claims', () => {
      it('nextRunAt tells when the next pending or waiting task of the listed workflows falls due', async () => {
        expect(await store.nextRunAt({ workflows: [ns.wf()], after: T0 })).toBeNull();
        await store.insertTask(newTask(ns, { runAt: T0 - 1000 })); // already due: the claim's business
        await store.insertTask(newTask(ns, { runAt: T0 + 9000 }));
        const soon = (await store.insertTask(newTask(ns, { runAt: T0 + 4000 }))).task;
        await store.insertTask(newTask(ns, { workflow: ns.wf('unlisted'), runAt: T0 + 1000 }));
        expect(await store.nextRunAt({ workflows: [ns.wf()], after: T0 })).toBe(T0 + 4000);
        expect(await store.nextRunAt({ workflows: [ns.wf(), ns.wf('unlisted')], after: T0 })).toBe(T0 + 1000);
        expect(await store.nextRunAt({ workflows: [ns.wf()], after: T0 + 4000 })).toBe(T0 + 9000);
        expect(await store.nextRunAt({ workflows: [ns.wf()], after: T0 + 9000 })).toBeNull();
        expect(await store.nextRunAt({ workflows: [], after: T0 })).toBeNull();
        // A task that is running is nobody's next wake-up.
        await store.claim(claimRequest(ns, { now: T0 + 4000, limit: 10 }));
        expect((await mustGet(store, soon.id)).status).toBe('running');
        expect(await store.nextRunAt({ workflows: [ns.wf()], after: T0 })).toBe(T0 + 9000);
      });

      it('claim takes due tasks of the listed workflows only, oldest run_at first, up to the limit', async () => {
        const a = (await store.insertTask(newTask(ns, { runAt: T0 - 3000 }))).task;
        const b = (await store.insertTask(newTask(ns, { runAt: T0 - 1000 }))).task;
        const c = (await store.insertTask(newTask(ns, { runAt: T0 - 2000 }))).task;
        const future = (await store.insertTask(newTask(ns, { runAt: T0 + 10_000 }))).task;
        const unlisted = (await store.insertTask(newTask(ns, { workflow: ns.wf('unlisted'), runAt: T0 - 5000 }))).task;

        const first = await store.claim(claimRequest(ns, { limit: 2, workerId: 'w1' }));
        expect(first.map((x) => [x.task.id, x.event])).toEqual([
          [a.id, 'claim'],
          [c.id, 'claim'],
        ]);
        expect(first[0]?.task).toMatchObject({
          status: 'running',
          leaseOwner: 'w1',
          epoch: 1,
          version: 2,
          runs: 1,
          updatedAt: T0,
        });
        await expectLease(store, first[0]?.task.leaseExpiresAt, T0);
        expect((await transitions(store, a.id))[1]).toMatchObject({ seq: 2, event: 'claim', fromStatus: 'pending', toStatus: 'running', epoch: 1, actor: 'worker:w1', detail: null, at: T0 });

        expect((await store.claim(claimRequest(ns, { workerId: 'w2' }))).map((x) => x.task.id)).toEqual([b.id]);
        expect(await store.claim(claimRequest(ns, { workerId: 'w2' }))).toEqual([]);
        expect((await mustGet(store, future.id)).status).toBe('pending');
        expect((await mustGet(store, unlisted.id)).status).toBe('pending');
        expect((await store.claim(claimRequest(ns, { now: T0 + 10_000 }))).map((x) => x.task.id)).toEqual([future.id]);
      });

      it.each([false, true])('claim leaves out the journal of a task the worker holds at the previous epoch, and reads every other (capped: %s)', async (capped) => {
        const held = await claimedTask(store, ns);
        const other = await claimedTask(store, ns);
        for (const task of [held, other]) {
          await store.transition(
            write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, at: T0 + 100, set: { clearLease: true, runAt: T0 }, steps: [stepRow(task.id, 0, task.epoch)] }),
          );
        }
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: held.id, name: 'go', payload: '"a"', idempotencyKey: null, at: T0 + 10 });
        // `other` is held at an epoch that is not the one before this claim: its journal is read.
        const journals = new Map([
          [held.id, held.epoch],
          [other.id, other.epoch - 1],
        ]);
        const claimed = await store.claim(claimRequest(ns, { now: T0 + 200, limit: 10, journals, ...(capped ? { concurrency: { [held.workflow]: 10 } } : {}) }));
        const byId = new Map(claimed.map((c) => [c.task.id, c]));
        expect(byId.get(held.id)).toMatchObject({ event: 'claim', steps: [], journalOmitted: true, task: { epoch: held.epoch + 1 } });
        expect(byId.get(held.id)?.signals.map((g) => g.name)).toEqual(['go']);
        expect(byId.get(other.id)?.steps).toEqual([stepRow(other.id, 0, other.epoch)]);
        expect(byId.get(other.id)?.journalOmitted).toBeUndefined();
      });

      it('claim takes only the listed versions of a workflow, when versions are listed', async () => {
        const v1 = (await store.insertTask(newTask(ns, { workflowVersion: '1', runAt: T0 - 2000 }))).task;
        const v2 = (await store.insertTask(newTask(ns, { workflowVersion: '2', runAt: T0 - 1000 }))).task;
        const v3 = (await store.insertTask(newTask(ns, { workflowVersion: '3', runAt: T0 - 500 }))).task;
        const only2 = await store.claim(claimRequest(ns, { versions: { [ns.wf()]: ['2'] } }));
        expect(only2.map((x) => x.task.id)).toEqual([v2.id]);
        const oneOrThree = await store.claim(claimRequest(ns, { workerId: 'w2', versions: { [ns.wf()]: ['3', '1'] } }));
        expect(oneOrThree.map((x) => x.task.id)).toEqual([v1.id, v3.id]);
      });

      it("a capped workflow at its limit does not hide other workflows' due tasks behind its backlog", async () => {
        const capped = ns.wf('capped');
        const free = ns.wf('free');
        for (let i = 0; i < 30; i++) await store.insertTask(newTask(ns, { workflow: capped, runAt: T0 - 10_000 + i }));
        const other = (await store.insertTask(newTask(ns, { workflow: free, runAt: T0 }))).task;
        const got = await store.claim(claimRequest(ns, { workflows: [capped, free], concurrency: { [capped]: 1 }, limit: 3 }));
        expect(got.map((x) => x.task.workflow).sort()).toEqual([capped, free].sort());
        expect(got.map((x) => x.task.id)).toContain(other.id);
      });

      it('claim with a limit of 0 or no workflows takes nothing', async () => {
        await store.insertTask(newTask(ns));
        expect(await store.claim(claimRequest(ns, { limit: 0 }))).toEqual([]);
        expect(await store.claim(claimRequest(ns, { workflows: [] }))).toEqual([]);
      });

      it('claiming a waiting task clears what it waited for and returns its steps and unconsumed signals', async () => {
        const task = await claimedTask(store, ns);
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'first', payload: '1', idempotencyKey: null, at: T0 + 1 });
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'second', payload: '2', idempotencyKey: null, at: T0 + 2 });
        const [first] = await store.getSignals(task.id);
        if (!first) throw new Error('no signal');
        expect(
          await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch, { kind: 'event' }), consume: { signalId: first.id, seq: 0 } }]),
        ).toEqual([true]);
        await store.transition(
          write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: T0 + 1000, wait: '{"event":"third"}', waitEvents: ['third'] } }),
        );
        const [claimed, ...rest] = await store.claim(claimRequest(ns, { now: T0 + 1000, workerId: 'w2' }));
        expect(rest).toEqual([]);
        expect(claimed?.event).toBe('claim');
        expect(claimed?.task).toMatchObject({ status: 'running', wait: null, waitEvents: null, epoch: 2, runs: 2, leaseOwner: 'w2' });
        expect(claimed?.steps).toEqual([stepRow(task.id, 0, task.epoch, { kind: 'event' })]);
        expect(claimed?.signals.map((s) => [s.name, s.payload, s.consumedSeq])).toEqual([['second', '2', null]]);
        expect((await transitions(store, task.id)).at(-1)).toMatchObject({ event: 'claim', fromStatus: 'waiting', toStatus: 'running', epoch: 2, actor: 'worker:w2' });
      });

      it('a first claim returns the signals sent before the task ever ran, each with its own task, and no journal', async () => {
        const a = (await store.insertTask(newTask(ns, { runAt: T0 - 2 }))).task;
        const b = (await store.insertTask(newTask(ns, { runAt: T0 - 1 }))).task;
        const c = (await store.insertTask(newTask(ns, { runAt: T0 }))).task;
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: a.id, name: 'early', payload: '"for a"', idempotencyKey: null, at: T0 - 1 });
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: c.id, name: 'early', payload: '"for c"', idempotencyKey: null, at: T0 - 1 });
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: c.id, name: 'later', payload: '"c again"', idempotencyKey: null, at: T0 });
        const claimed = await store.claim(claimRequest(ns, { limit: 3 }));
        expect(claimed.map((x) => x.task.id)).toEqual([a.id, b.id, c.id]);
        expect(claimed.map((x) => x.signals.map((g) => [g.taskId, g.payload]))).toEqual([
          [[a.id, '"for a"']],
          [],
          [
            [c.id, '"for c"'],
            [c.id, '"c again"'],
          ],
        ]);
        expect(claimed.every((x) => x.steps.length === 0 && x.task.runs === 1)).toBe(true);
      });

      it('claim reclaims expired leases first, bumping the epoch and recording the previous owner', async () => {
        const stale = await claimedTask(store, ns, { runAt: T0 }, 'w1');
        const due = (await store.insertTask(newTask(ns, { runAt: T0 }))).task;
        expect(await store.claim(claimRequest(ns, { now: T0 + LEASE_MS - 1, workerId: 'w2', limit: 1 }))).toMatchObject([{ task: { id: due.id } }]);
        const late = T0 + LEASE_MS + 1;
        await passLeaseTime(store, [stale.id], LEASE_MS + 1);
        const [reclaimed, ...rest] = await store.claim(claimRequest(ns, { now: late, workerId: 'w3', limit: 1 }));
        expect(rest).toEqual([]);
        expect(reclaimed?.event).toBe('reclaim');
        expect(reclaimed?.task).toMatchObject({ id: stale.id, status: 'running', leaseOwner: 'w3', epoch: stale.epoch + 1, runs: 2 });
        await expectLease(store, reclaimed?.task.leaseExpiresAt, late);
        expect((await transitions(store, stale.id)).at(-1)).toMatchObject({
          event: 'reclaim',
          fromStatus: 'running',
          toStatus: 'running',
          epoch: stale.epoch + 1,
          actor: 'worker:w3',
          detail: '{"previousOwner":"w1"}',
        });
      });

      it('claim reclaims an expired cancelling task as cancelling (its new run finishes the cleanup), with or without caps', async () => {
        for (const concurrency of [undefined, { [ns.wf()]: 5 }]) {
          const task = await claimedTask(store, ns, { runAt: T0 }, 'w1');
          await store.transition(write(task, { event: 'cancel', to: 'cancelling', set: { cancelReason: 'user asked' } }));
          await passLeaseTime(store, [task.id], LEASE_MS + 1);
          const [reclaimed, ...rest] = await store.claim(claimRequest(ns, { now: T0 + LEASE_MS + 1, workerId: 'w2', ...(concurrency ? { concurrency } : {}) }));
          expect(rest).toEqual([]);
          expect(reclaimed).toMatchObject({ event: 'reclaim', task: { id: task.id, status: 'cancelling', cancelReason: 'user asked', leaseOwner: 'w2', epoch: task.epoch + 1 } });
          expect((await transitions(store, task.id)).at(-1)).toMatchObject({ event: 'reclaim', fromStatus: 'cancelling', toStatus: 'cancelling', actor: 'worker:w2' });
          await store.transition(
            write(reclaimed?.task as TaskRow, {
              event: 'abort',
              from: ['cancelling'],
              to: 'cancelled',
              guard: { epoch: task.epoch + 1 },
              set: { clearLease: true, finishedAt: T0 + LEASE_MS + 2 },
            }),
          );
        }
      });

      it('per-workflow concurrency caps count leased tasks across claims and free up as tasks finish', async () => {
        const capped = ns.wf('capped');
        const free = ns.wf('free');
        for (let i = 0; i < 5; i++) await store.insertTask(newTask(ns, { workflow: capped }));
        for (let i = 0; i < 3; i++) await store.insertTask(newTask(ns, { workflow: free }));
        const request = claimRequest(ns, { workflows: [capped, free], concurrency: { [capped]: 2 } });

        const first = await store.claim(request);
        expect(first.filter((c) => c.task.workflow === capped)).toHaveLength(2);
        expect(first.filter((c) => c.task.workflow === free)).toHaveLength(3);
        expect(await store.claim({ ...request, workerId: 'w2' })).toEqual([]);

        const done = first.find((c) => c.task.workflow === capped)?.task;
        if (!done) throw new Error('unreachable');
        await store.transition(write(done, { event: 'complete', to: 'succeeded', guard: { epoch: done.epoch }, set: { clearLease: true, output: '1', finishedAt: T0 + 100 } }));
        const next = await store.claim({ ...request, workerId: 'w2' });
        expect(next.map((c) => c.task.workflow)).toEqual([capped]);
        // Without the cap the rest is claimable.
        expect(await store.claim({ ...request, workerId: 'w3', concurrency: {} })).toHaveLength(2);
      });
    });

    describe('fenced writes', () => {
      it('a step write is refused after another claim bumped the epoch, and accepted for the current epoch', async () => {
        const task = await claimedTask(store, ns, {}, 'w1');
        await passLeaseTime(store, [task.id], LEASE_MS);
        const [reclaim] = await store.claim(claimRequest(ns, { now: T0 + LEASE_MS, workerId: 'w2' }));
        expect(reclaim?.task.epoch).toBe(task.epoch + 1);
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) }])).toEqual([false]);
        expect(await store.getSteps(task.id)).toEqual([]);
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch + 1, step: stepRow(task.id, 0, task.epoch + 1) }])).toEqual([true]);
        expect(await store.getSteps(task.id)).toEqual([stepRow(task.id, 0, task.epoch + 1)]);
      });

      it('a step write is refused once the task is no longer leased, even at its epoch', async () => {
        const task = await claimedTask(store, ns);
        await store.transition(write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: T0 + 10 } }));
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) }])).toEqual([false]);
        expect(await store.getSteps(task.id)).toEqual([]);
      });

      it('a step write upserts by position and consumes its signal only when accepted', async () => {
        const task = await claimedTask(store, ns);
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'go', payload: null, idempotencyKey: null, at: T0 });
        const [signal] = await store.getSignals(task.id);
        if (!signal) throw new Error('no signal');
        const consume = { signalId: signal.id, seq: 0 };
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch + 5, step: stepRow(task.id, 0, task.epoch), consume }])).toEqual([false]);
        expect((await store.getSignals(task.id))[0]?.consumedSeq).toBeNull();
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch, { status: 'retrying' }) }])).toEqual([true]);
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch, { attempts: 2 }), consume }])).toEqual([true]);
        expect(await store.getSteps(task.id)).toEqual([stepRow(task.id, 0, task.epoch, { attempts: 2 })]);
        expect((await store.getSignals(task.id))[0]?.consumedSeq).toBe(0);
      });

      it('a write marked fresh writes what the same write without the mark would, even at a position that holds a row; refused like any other at a stale epoch', async () => {
        // A retried write whose first attempt committed: the hint is wrong, the write still lands.
        const outcome = async (fresh: boolean) => {
          const task = await claimedTask(store, ns);
          const mark = fresh ? { fresh: true as const } : {};
          const results = [
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch), ...mark }])),
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch, { attempts: 2 }), ...mark }])),
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 1, task.epoch, { status: 'retrying' }), ...mark }])),
            // A row with an entry of its own (not carried), over an occupied position.
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 1, task.epoch, { status: 'retrying', attempts: 2 }), ...mark }])),
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch + 1, step: stepRow(task.id, 2, task.epoch), ...mark }])),
            ...(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch + 1, step: stepRow(task.id, 0, task.epoch), ...mark }])),
          ];
          const steps = (await store.getSteps(task.id)).map((s) => ({ ...s, taskId: 'x' }));
          const events = (await store.getEvents(task.id)).map((e) => [e.seq, e.type]);
          return { results, steps, events };
        };
        const plain = await outcome(false);
        expect(plain.results).toEqual([true, true, true, true, false, false]);
        expect(plain.steps.map((s) => [s.seq, s.attempts, s.status])).toEqual([
          [0, 2, 'completed'],
          [1, 2, 'retrying'],
        ]);
        expect(await outcome(true)).toEqual(plain);
      });

      it("a step's business key is kept on its journal row and in its log entry: written alone, in a batch, with a transition, and when the transition deletes the row", async () => {
        const a = await claimedTask(store, ns);
        const b = await claimedTask(store, ns);
        expect(await store.writeBatch([{ kind: 'step', taskId: a.id, epoch: a.epoch, step: stepRow(a.id, 0, a.epoch, { businessKey: 'v1:order-42' }) }])).toEqual([true]);
        expect(
          await store.writeBatch([
            { kind: 'step', taskId: a.id, epoch: a.epoch, step: stepRow(a.id, 1, a.epoch, { businessKey: 'v2:invoice-7' }) },
            { kind: 'step', taskId: b.id, epoch: b.epoch, step: stepRow(b.id, 0, b.epoch) },
          ]),
        ).toEqual([true, true]);
        const running = await mustGet(store, a.id);
        // The transition deletes row 1: its entry moves to the log's own rows, key included.
        expect(
          await store.transition(
            write(running, {
              event: 'complete',
              to: 'succeeded',
              guard: { epoch: a.epoch },
              workerId: 'w1',
              set: { output: '"done"', clearLease: true, finishedAt: T0 + 100 },
              steps: [stepRow(a.id, 2, a.epoch, { businessKey: 'v1:ship-9' })],
              deleteSteps: [1],
            }),
          ),
        ).toMatchObject({ status: 'succeeded' });
        expect(await store.getSteps(a.id)).toEqual([stepRow(a.id, 0, a.epoch, { businessKey: 'v1:order-42' }), stepRow(a.id, 2, a.epoch, { businessKey: 'v1:ship-9' })]);
        expect(await store.getSteps(b.id)).toEqual([stepRow(b.id, 0, b.epoch)]);
        const keys = (await store.getEvents(a.id)).filter((e) => e.type === 'step:completed').map((e) => (JSON.parse(e.data ?? '{}') as { businessKey: unknown }).businessKey);
        expect(keys).toEqual(['v1:order-42', 'v2:invoice-7', 'v1:ship-9']);
      });

      it('writeBatch guards each op on its own: refused ops do not undo accepted ones', async () => {
        const one = await claimedTask(store, ns);
        const two = await claimedTask(store, ns);
        const results = await store.writeBatch([
          { kind: 'step', taskId: one.id, epoch: one.epoch, step: stepRow(one.id, 0, one.epoch) },
          { kind: 'step', taskId: two.id, epoch: two.epoch + 1, step: stepRow(two.id, 0, two.epoch) },
          write(one, { event: 'complete', to: 'succeeded', guard: { epoch: one.epoch }, set: { output: '"done"', clearLease: true, finishedAt: T0 + 100 } }),
          write(two, { event: 'complete', to: 'succeeded', guard: { version: two.version - 1 }, set: { output: '"done"' } }),
          { kind: 'step', taskId: two.id, epoch: two.epoch, step: stepRow(two.id, 1, two.epoch) },
        ]);
        expect(results[0]).toBe(true);
        expect(results[1]).toBe(false);
        expect(results[2]).toMatchObject({ id: one.id, status: 'succeeded', output: '"done"' });
        expect(results[3]).toBeNull();
        expect(results[4]).toBe(true);
        expect(results).toHaveLength(5);
        expect(await store.getSteps(one.id)).toEqual([stepRow(one.id, 0, one.epoch)]);
        expect(await store.getSteps(two.id)).toEqual([stepRow(two.id, 1, two.epoch)]);
        expect(await mustGet(store, two.id)).toEqual(two);
        expect((await transitions(store, one.id)).map((h) => h.event)).toEqual(['create', 'claim', 'complete']);
        expect((await transitions(store, two.id)).map((h) => h.event)).toEqual(['create', 'claim']);
        expect(await store.writeBatch([])).toEqual([]);
      });
    });

    describe('leases', () => {
      it('heartbeat renews only leases held at the current epoch and reports status, pause request and cancel reason; a fenced task is no longer held', async () => {
        const pausing = await claimedTask(store, ns);
        const cancelling = await claimedTask(store, ns);
        const lost = await claimedTask(store, ns);
        const failing = await claimedTask(store, ns);
        await store.transition(write(pausing, { event: 'pause', to: 'running', pauseRequested: false, set: { pauseRequested: true } }));
        await store.transition(write(cancelling, { event: 'cancel', to: 'cancelling', set: { cancelReason: 'user asked' } }));
        // The dwell scanner's expire of a running task fences its run off: a new epoch, the lease expired.
        expect(await store.transition(write(failing, { event: 'expire', to: 'running', set: { error: '{"message":"stalled"}', expireLease: true, incrementEpoch: true } }))).toMatchObject({
          epoch: failing.epoch + 1,
          leaseOwner: null,
          error: '{"message":"stalled"}',
        });

        const held = await store.heartbeat({
          workerId: 'w1',
          now: T0 + 1000,
          leaseMs: LEASE_MS,
          held: [
            { taskId: pausing.id, epoch: pausing.epoch },
            { taskId: cancelling.id, epoch: cancelling.epoch },
            { taskId: lost.id, epoch: lost.epoch + 1 },
            { taskId: failing.id, epoch: failing.epoch },
          ],
        });
        expect(held).toEqual([
          { taskId: pausing.id, status: 'running', pauseRequested: true, cancelReason: null },
          { taskId: cancelling.id, status: 'cancelling', pauseRequested: false, cancelReason: 'user asked' },
        ]);
        await expectLease(store, (await mustGet(store, pausing.id)).leaseExpiresAt, T0 + 1000);
        await expectLease(store, (await mustGet(store, cancelling.id)).leaseExpiresAt, T0 + 1000);
        expect((await mustGet(store, lost.id)).leaseExpiresAt).toBe(lost.leaseExpiresAt);
        // Another worker cannot renew a lease it does not own.
        expect(await store.heartbeat({ workerId: 'w2', now: T0 + 2000, leaseMs: LEASE_MS, held: [{ taskId: pausing.id, epoch: pausing.epoch }] })).toEqual([]);
        expect(await store.heartbeat({ workerId: 'w1', now: T0, leaseMs: LEASE_MS, held: [] })).toEqual([]);
      });

      it("lists the owners of live leases and ends one dead owner's leases at once, for the next claim to reclaim", async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const dead = await claimedTask(s, ns, {}, 'host-111-dead');
        const alive = await claimedTask(s, ns, {}, 'host-222-alive');
        expect((await s.leaseOwners(T0 + 1)).sort()).toEqual(['host-111-dead', 'host-222-alive']);
        expect(await s.endLeasesOf('host-111-dead', T0 + 1)).toBe(1);
        expect(await s.endLeasesOf('host-111-dead', T0 + 1)).toBe(0); // nothing live left
        expect(await s.leaseOwners(T0 + 1)).toEqual(['host-222-alive']);
        const reclaimed = await s.claim(claimRequest(ns, { workerId: 'w9', now: T0 + 2, limit: 5 }));
        expect(reclaimed.map((c) => [c.task.id, c.event])).toEqual([[dead.id, 'reclaim']]);
        expect((await mustGet(s, alive.id)).leaseOwner).toBe('host-222-alive');
        expect((await mustGet(s, dead.id)).status).toBe('running'); // ending a lease changes no status
      });

      it('expireLeases moves expired leases to the target status with a log entry, and leaves live leases alone', async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const expired = await claimedTask(s, ns, {}, 'w1');
        const cancelling = await claimedTask(s, ns, {}, 'w1');
        await s.transition(write(cancelling, { event: 'cancel', to: 'cancelling', set: { cancelReason: 'stop' } }));
        const live = (await s.insertTask(newTask(ns, { runAt: T0 + 5000 }))).task;
        await s.claim(claimRequest(ns, { now: T0 + 5000, workerId: 'w2' }));

        const now = T0 + LEASE_MS + 10; // past the first two leases, not the third
        await passLeaseTime(s, [expired.id, cancelling.id], LEASE_MS + 10);
        const count = await s.expireLeases({ now, event: 'release', from: ['running'], to: 'pending', set: { clearLease: true, runAt: now } });
        expect(count).toBe(1);
        expect(await mustGet(s, expired.id)).toMatchObject({ status: 'pending', leaseOwner: null, leaseExpiresAt: null, runAt: now, version: expired.version + 1, epoch: expired.epoch });
        expect((await transitions(s, expired.id)).at(-1)).toMatchObject({
          event: 'release',
          fromStatus: 'running',
          toStatus: 'pending',
          actor: 'system:lease-expiry',
          at: now,
          detail: '{"reason":"lease expired","previousOwner":"w1"}',
        });
        expect((await mustGet(s, cancelling.id)).status).toBe('cancelling');
        expect(await mustGet(s, live.id)).toMatchObject({ status: 'running', leaseOwner: 'w2' });

        expect(await s.expireLeases({ now, event: 'abort', from: ['cancelling'], to: 'cancelled', set: { clearLease: true, finishedAt: now } })).toBe(1);
        expect(await mustGet(s, cancelling.id)).toMatchObject({ status: 'cancelled', finishedAt: now, cancelReason: 'stop' });
        expect(await s.expireLeases({ now, event: 'release', from: ['running'], to: 'pending', set: {} })).toBe(0);
      });

      it("expireLeases with expiredForMs spares leases expired for less than that, and writes its note with the task's workflow and version", async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const task = await claimedTask(s, ns, {}, 'w1');
        await s.transition(write(task, { event: 'cancel', to: 'cancelling', set: { cancelReason: 'stop' } }));
        const request = (now: number) => ({
          now,
          event: 'abort',
          from: ['cancelling'] as TaskStatus[],
          to: 'cancelled' as TaskStatus,
          set: { clearLease: true, finishedAt: now },
          expiredForMs: 5000,
          note: 'no worker of "{workflow}" version {version}',
        });
        // Expired for 1 s: spared.
        await passLeaseTime(s, [task.id], LEASE_MS + 1000);
        expect(await s.expireLeases(request(T0 + LEASE_MS + 1000))).toBe(0);
        expect((await mustGet(s, task.id)).status).toBe('cancelling');
        // Expired for 6 s: ended.
        await passLeaseTime(s, [task.id], 5000);
        const now = T0 + LEASE_MS + 6000;
        expect(await s.expireLeases(request(now))).toBe(1);
        expect(await mustGet(s, task.id)).toMatchObject({ status: 'cancelled', finishedAt: now, leaseOwner: null });
        const last = (await transitions(s, task.id)).at(-1);
        expect(last).toMatchObject({ event: 'abort', fromStatus: 'cancelling', toStatus: 'cancelled', actor: 'system:lease-expiry' });
        expect(JSON.parse(last?.detail ?? 'null')).toEqual({ reason: 'lease expired', previousOwner: 'w1', note: `no worker of "${task.workflow}" version v1` });
      });
    });

    describe('signals', () => {
      it('insertSignal deduplicates by idempotency key per task, and returns null for an unknown task', async () => {
        const a = (await store.insertTask(newTask(ns))).task;
        const b = (await store.insertTask(newTask(ns))).task;
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: a.id, name: 'cb', payload: '1', idempotencyKey: 'k1', at: T0 })).toEqual({ created: true });
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: a.id, name: 'cb', payload: '2', idempotencyKey: 'k1', at: T0 + 1 })).toEqual({ created: false });
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: b.id, name: 'cb', payload: '3', idempotencyKey: 'k1', at: T0 + 2 })).toEqual({ created: true });
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: a.id, name: 'cb', payload: '4', idempotencyKey: null, at: T0 + 3 })).toEqual({ created: true });
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: a.id, name: 'cb', payload: '5', idempotencyKey: null, at: T0 + 4 })).toEqual({ created: true });
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: ns.id(), name: 'cb', payload: null, idempotencyKey: null, at: T0 })).toBeNull();
        const signals = await store.getSignals(a.id);
        expect(signals.map((s) => [s.name, s.payload, s.idempotencyKey, s.createdAt, s.consumedSeq])).toEqual([
          ['cb', '1', 'k1', T0, null],
          ['cb', '4', null, T0 + 3, null],
          ['cb', '5', null, T0 + 4, null],
        ]);
        expect(signals.every((s) => s.taskId === a.id && s.id > 0)).toBe(true);
      });

      it('onlyIfAwaited records a signal only while the task waits for its name, then the task waits for nothing more', async () => {
        const task = await claimedTask(store, ns);
        const send = (name: string, key: string | null = null) =>
          store.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: task.id, name, payload: null, idempotencyKey: key, at: T0 + 500, onlyIfAwaited: true });
        expect(await send('approve')).toEqual({ created: false, refused: { status: 'running', waitEvents: [] } });
        await store.transition(write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: null, waitEvents: ['approve', 'reject'] } }));
        const before = await logOf(store, task.id);
        expect(await send('publish')).toEqual({ created: false, refused: { status: 'waiting', waitEvents: ['approve', 'reject'] } });
        expect(await logOf(store, task.id)).toEqual(before);
        expect(await store.getSignals(task.id)).toEqual([]);
        expect(await send('approve', 'k1')).toEqual({ created: true });
        const due = await mustGet(store, task.id);
        expect([due.status, due.runAt, due.waitEvents]).toEqual(['waiting', T0 + 500, null]);
        // The wait is taken: the other event of it is refused, the same key repeated too (the engine answers repeats first).
        expect(await send('reject')).toEqual({ created: false, refused: { status: 'waiting', waitEvents: [] } });
        expect((await store.getSignals(task.id)).map((x) => x.name)).toEqual(['approve']);
        expect(
          await store.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: ns.id(), name: 'approve', payload: null, idempotencyKey: null, at: T0, onlyIfAwaited: true }),
        ).toBeNull();
      });

      it('a signal makes a task waiting for that event due at once, and leaves one waiting for another event alone', async () => {
        const task = await claimedTask(store, ns);
        await store.transition(write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: null, waitEvents: ['approved'] } }));
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'other', payload: null, idempotencyKey: null, at: T0 + 500 });
        expect((await mustGet(store, task.id)).runAt).toBeNull();
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'approved', payload: '{"by":"ed"}', idempotencyKey: 'once', at: T0 + 600 });
        expect((await mustGet(store, task.id)).runAt).toBe(T0 + 600);
        // A duplicate does not move the task again.
        await store.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'approved', payload: null, idempotencyKey: 'once', at: T0 + 700 });
        expect((await mustGet(store, task.id)).runAt).toBe(T0 + 600);
        const [claimed] = await store.claim(claimRequest(ns, { now: T0 + 600 }));
        expect(claimed?.signals.map((s) => s.name)).toEqual(['other', 'approved']);
      });
    });

    describe('approvals', () => {
      const approvalRow = (taskId: string, over: Partial<ApprovalRow> = {}): ApprovalRow => ({
        id: `apv_${randomBytes(6).toString('hex')}`,
        taskId,
        workflow: 'wf',
        name: 'review',
        callKey: 'approval:review@0',
        status: 'pending',
        approvers: '["alice","bob"]',
        quorum: 1,
        payload: '{"draft":1}',
        policy: '{}',
        deadline: T0 + 1000,
        remindAt: null,
        level: 1,
        decisions: '[]',
        outcome: null,
        version: 1,
        createdAt: T0,
        decidedAt: null,
        ...over,
      });
      const asked = (a: ApprovalRow): NewEvent => ({ type: 'approval:requested', actorKind: 'worker', actorId: 'w1', data: JSON.stringify({ approvalId: a.id, name: a.name }) });

      it('insertApproval creates the record with its log entry only while the task is leased at the epoch, and returns the existing record for the same call key', async () => {
        const task = await claimedTask(store, ns);
        const first = approvalRow(task.id);
        expect(await store.insertApproval({ approval: first, epoch: task.epoch + 1, at: T0, log: [asked(first)] })).toBeNull();
        const created = await store.insertApproval({ approval: first, epoch: task.epoch, at: T0, log: [asked(first)] });
        expect(created).toEqual({ approval: first, created: true });
        // A resumed run asks again for the same call: it gets the record it created, no second entry.
        const again = await store.insertApproval({ approval: approvalRow(task.id), epoch: task.epoch, at: T0 + 5, log: [asked(first)] });
        expect(again).toEqual({ approval: first, created: false });
        expect(await store.getApproval(first.id)).toEqual(first);
        expect(await store.getApproval('apv_missing')).toBeNull();
        expect((await logOf(store, task.id)).filter((e) => e.includes('approval:'))).toEqual(['3:approval:requested:worker:w1']);
      });

      it('updateApproval is a compare-and-set on the version, guarded by the task status and the epoch, and appends its entries in the same write', async () => {
        const task = await claimedTask(store, ns);
        const a = approvalRow(task.id);
        await store.insertApproval({ approval: a, epoch: task.epoch, at: T0, log: [] });
        const entry: NewEvent = { type: 'approval:decision', actorKind: 'user', actorId: 'alice', data: '{"approvalId":"x","name":"review"}' };
        const set = { decisions: '[{"by":"alice"}]' };
        expect(await store.updateApproval({ id: a.id, version: 2, set, at: T0 + 1, log: [entry] })).toBeNull();
        expect(await store.updateApproval({ id: a.id, version: 1, set, at: T0 + 1, log: [entry], taskStatuses: ['waiting'] })).toBeNull();
        expect(await store.updateApproval({ id: a.id, version: 1, set, at: T0 + 1, log: [entry], epoch: task.epoch + 1 })).toBeNull();
        expect(await store.updateApproval({ id: 'apv_missing', version: 1, set, at: T0 + 1, log: [entry] })).toBeNull();
        expect((await logOf(store, task.id)).filter((e) => e.includes('approval:'))).toEqual([]);
        const updated = await store.updateApproval({ id: a.id, version: 1, set, at: T0 + 1, log: [entry], taskStatuses: ['running'], epoch: task.epoch });
        expect(updated).toEqual({ ...a, ...set, version: 2 });
        const settled = await store.updateApproval({
          id: a.id,
          version: 2,
          at: T0 + 2,
          log: [entry, { ...entry, type: 'approval:decided' }],
          set: { status: 'approved', outcome: '{"approved":true}', decidedAt: T0 + 2, remindAt: null, deadline: null, level: 2, approvers: '["alice"]' },
        });
        expect(settled).toMatchObject({ status: 'approved', outcome: '{"approved":true}', decidedAt: T0 + 2, deadline: null, level: 2, approvers: '["alice"]', version: 3 });
        expect((await logOf(store, task.id)).filter((e) => e.includes('approval:'))).toEqual([
          '3:approval:decision:user:alice',
          '4:approval:decision:user:alice',
          '5:approval:decided:user:alice',
        ]);
      });

      it('a wake-up signal recorded with an update is recorded once and makes the task waiting for it due; the update is announced', async () => {
        const task = await claimedTask(store, ns);
        const a = approvalRow(task.id);
        await store.insertApproval({ approval: a, epoch: task.epoch, at: T0, log: [] });
        const name = `approval:${a.id}`;
        await store.transition(write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: null, waitEvents: [name] } }));
        expect((await mustGet(store, task.id)).runAt).toBeNull();
        const heard: WakeEvent[] = [];
        // SQLite's subscription tells of other connections' commits only, as '*' (sqlite.commit-watch.test.ts).
        const off = store.dialect === 'postgres' ? await store.subscribe?.((e) => heard.push(e)) : null;
        const wake = { reason: 'task' as const, taskId: task.id, workflow: task.workflow };
        await store.updateApproval({ id: a.id, version: 1, set: { status: 'approved' }, at: T0 + 50, log: [], wake: { name, key: name }, notify: wake });
        expect((await mustGet(store, task.id)).runAt).toBe(T0 + 50);
        await store.updateApproval({ id: a.id, version: 2, set: {}, at: T0 + 60, log: [], wake: { name, key: name } });
        expect((await store.getSignals(task.id)).map((sig) => [sig.name, sig.idempotencyKey, sig.createdAt])).toEqual([[name, name, T0 + 50]]);
        expect((await mustGet(store, task.id)).runAt).toBe(T0 + 50);
        if (off) {
          await eventually(() => heard.some((e) => e.taskId === task.id), 'the announcement');
          await off();
        }
      });

      it("a planned update is judged in its transaction on the approval as it is, at the store's clock (the later of `at` and the database's); a null plan writes nothing", async () => {
        const task = await claimedTask(store, ns);
        const a = approvalRow(task.id);
        await store.insertApproval({ approval: a, epoch: task.epoch, at: T0, log: [] });
        const seen: Array<[ApprovalRow, number]> = [];
        const before = Date.now();
        // `at` long past: PostgreSQL judges at its own clock, SQLite (whose clock is the engine's) at `at`.
        const none = await store.updateApproval({ id: a.id, version: 1, set: { status: 'rejected' }, at: 5, log: [], plan: (row, now) => (seen.push([row, now]), null) });
        expect(none).toEqual(a);
        expect(seen[0]?.[0]).toEqual(a);
        if (store.dialect === 'postgres') expect(seen[0]?.[1]).toBeGreaterThanOrEqual(before - 60_000);
        else expect(seen[0]?.[1]).toBe(5);
        // `at` ahead of the database's clock: the plan judges at `at`, and its change is written instead of `set`.
        const late = Date.now() + 365 * 86_400_000;
        const entry: NewEvent = { type: 'approval:decided', actorKind: 'system', actorId: 'approval-policy:reject', data: '{}' };
        const planned = await store.updateApproval({
          id: a.id,
          version: 1,
          set: { status: 'rejected' },
          at: late,
          log: [],
          plan: (row, now) => ({ set: { status: 'expired', decidedAt: now, level: row.level + 1 }, log: [entry] }),
        });
        expect(planned).toEqual({ ...a, status: 'expired', decidedAt: late, level: 2, version: 2 });
        expect((await logOf(store, task.id)).filter((e) => e.includes('approval:'))).toEqual(['3:approval:decided:system:approval-policy:reject']);
        // The guards come first: a stale version is refused without asking the plan.
        expect(await store.updateApproval({ id: a.id, version: 1, set: {}, at: late, log: [], plan: () => expect.unreachable() })).toBeNull();
      });

      it('appendEvents appends entries only while the task version is unchanged, and bumps it', async () => {
        const task = await claimedTask(store, ns);
        const alert: NewEvent = { type: 'dwell:exceeded', actorKind: 'system', actorId: 'dwell-timeout', data: '{"status":"running"}' };
        expect(await store.appendEvents({ taskId: task.id, version: task.version + 1, at: T0 + 9, log: [alert] })).toBe(false);
        expect(await store.appendEvents({ taskId: task.id, version: task.version, at: T0 + 9, log: [alert] })).toBe(true);
        expect(await store.appendEvents({ taskId: task.id, version: task.version, at: T0 + 9, log: [alert] })).toBe(false);
        const after = await mustGet(store, task.id);
        expect(after.version).toBe(task.version + 1);
        expect({ status: after.status, updatedAt: after.updatedAt }).toEqual({ status: task.status, updatedAt: task.updatedAt });
        expect((await logOf(store, task.id)).slice(-1)).toEqual(['3:dwell:exceeded:system:dwell-timeout']);
      });

      it('alerts are listed newest first, by kind, workflow, task and before an id, once per dedupe key, and purged by age in batches', async () => {
        const pre = ns.id();
        const row = (id: string, kind: string, at: number, taskId: string | null = null): AlertRow => ({
          id,
          kind,
          subject: taskId ? `task:${taskId}` : 'workflow:wf',
          workflow: 'wf',
          taskId,
          message: `${kind} at ${at}`,
          data: `{"at":${at}}`,
          raisedAt: at,
          raisedBy: 'w1',
          dedupe: `${pre}:${kind}:${at}`,
        });
        await store.insertAlert(row(`${pre}-a1`, 'failure-rate', T0 + 1));
        await store.insertAlert(row(`${pre}-a2`, 'crash-loop', T0 + 2, `${pre}-t`));
        await store.insertAlert(row(`${pre}-a3`, 'failure-rate', T0 + 3));
        await store.insertAlert(row(`${pre}-a3`, 'failure-rate', T0 + 3)); // a repeat of an id is ignored
        await store.insertAlert({ ...row(`${pre}-a4`, 'failure-rate', T0 + 3), message: 'again' }); // and of its dedupe key too
        const mine = async (q: Partial<AlertQuery> = {}): Promise<string[]> => (await store.listAlerts({ limit: 100, ...q })).filter((a) => a.id.startsWith(pre)).map((a) => a.id);
        expect(await mine()).toEqual([`${pre}-a3`, `${pre}-a2`, `${pre}-a1`]);
        expect(await mine({ kinds: ['failure-rate'] })).toEqual([`${pre}-a3`, `${pre}-a1`]);
        expect(await mine({ taskId: `${pre}-t` })).toEqual([`${pre}-a2`]);
        expect(await mine({ before: `${pre}-a3` })).toEqual([`${pre}-a2`, `${pre}-a1`]);
        expect((await store.listAlerts({ limit: 100, taskId: `${pre}-t` }))[0]).toEqual(row(`${pre}-a2`, 'crash-loop', T0 + 2, `${pre}-t`));
        expect(await store.purgeAlerts(T0 + 3, 1)).toBe(1);
        expect(await store.purgeAlerts(T0 + 3, 10)).toBe(1);
        expect(await mine()).toEqual([`${pre}-a3`]);
      });

      it('getEventsOfType reads the entries of the given types only, oldest first, and nothing for an unknown task', async () => {
        const task = await claimedTask(store, ns);
        const usage = (n: number): NewEvent => ({ type: 'usage:attempt', actorKind: 'worker', actorId: 'w', data: `{"n":${n}}` });
        const note: NewEvent = { type: 'dwell:exceeded', actorKind: 'system', actorId: 'dwell-timeout', data: '{"status":"running"}' };
        expect(await store.appendEvents({ taskId: task.id, version: task.version, at: T0 + 9, log: [usage(1), note, usage(2)] })).toBe(true);
        const found = await store.getEventsOfType(task.id, ['usage:attempt']);
        expect(found.map((e) => [e.taskId, e.type, e.data])).toEqual([
          [task.id, 'usage:attempt', '{"n":1}'],
          [task.id, 'usage:attempt', '{"n":2}'],
        ]);
        expect(found[0]!.seq).toBeLessThan(found[1]!.seq);
        expect((await store.getEventsOfType(task.id, ['usage:attempt', 'dwell:exceeded'])).map((e) => e.type)).toEqual(['usage:attempt', 'dwell:exceeded', 'usage:attempt']);
        expect(await store.getEventsOfType(task.id, [])).toEqual([]);
        expect(await store.getEventsOfType('no-such-task', ['usage:attempt'])).toEqual([]);
      });

      it('listApprovals filters by task, statuses, listed approver and workflow, oldest first', async () => {
        const t1 = await claimedTask(store, ns);
        const t2 = await claimedTask(store, ns);
        const rows = [
          approvalRow(t1.id, { callKey: 'a@0', createdAt: T0 + 1, approvers: '["alice"]' }),
          approvalRow(t1.id, { callKey: 'b@0', createdAt: T0 + 2, approvers: '["bob","carol"]', status: 'approved' }),
          approvalRow(t2.id, { callKey: 'a@0', createdAt: T0 + 3, approvers: '[]', workflow: 'other', status: 'escalated' }),
        ];
        for (const r of rows) await store.insertApproval({ approval: r, epoch: r.taskId === t1.id ? t1.epoch : t2.epoch, at: T0, log: [] });
        const ids = (list: ApprovalRow[]) => list.map((r) => rows.indexOf(rows.find((x) => x.id === r.id) as ApprovalRow));
        expect(ids(await store.listApprovals({ taskId: t1.id, limit: 10 }))).toEqual([0, 1]);
        expect(ids(await store.listApprovals({ taskId: t1.id, statuses: ['pending', 'escalated'], limit: 10 }))).toEqual([0]);
        expect(ids((await store.listApprovals({ statuses: ['pending', 'escalated'], limit: 1000 })).filter((r) => rows.some((x) => x.id === r.id)))).toEqual([0, 2]);
        expect(ids((await store.listApprovals({ approver: 'carol', limit: 1000 })).filter((r) => rows.some((x) => x.id === r.id)))).toEqual([1]);
        expect(ids(await store.listApprovals({ workflow: 'other', taskId: t2.id, limit: 10 }))).toEqual([2]);
        expect(await store.listApprovals({ taskId: t1.id, limit: 1 })).toHaveLength(1);
      });

      it('listApprovals filters by the task status: taskStatuses keeps only tasks in them, openOnlyFor hides open approvals of other tasks but keeps settled ones', async () => {
        const live = await claimedTask(store, ns);
        const ended = await claimedTask(store, ns);
        const rows = [
          approvalRow(live.id, { callKey: 'a@0', createdAt: T0 + 1 }),
          approvalRow(ended.id, { callKey: 'a@0', createdAt: T0 + 2 }),
          approvalRow(ended.id, { callKey: 'b@0', createdAt: T0 + 3, status: 'escalated' }),
          approvalRow(ended.id, { callKey: 'c@0', createdAt: T0 + 4, status: 'approved' }),
        ];
        for (const r of rows) await store.insertApproval({ approval: r, epoch: r.taskId === live.id ? live.epoch : ended.epoch, at: T0, log: [] });
        const failed = await store.transition(
          write(ended, {
            event: 'fail',
            to: 'failed',
            guard: { epoch: ended.epoch },
            at: T0 + 200,
            workerId: 'w1',
            set: { error: '{"message":"boom"}', clearLease: true, finishedAt: T0 + 200 },
          }),
        );
        expect(failed?.status).toBe('failed');
        const mine = (list: ApprovalRow[]) => list.filter((r) => rows.some((x) => x.id === r.id)).map((r) => rows.findIndex((x) => x.id === r.id));
        expect(mine(await store.listApprovals({ statuses: ['pending', 'escalated'], taskStatuses: ['failed', 'cancelled', 'succeeded'], limit: 1000 }))).toEqual([1, 2]);
        expect(mine(await store.listApprovals({ taskStatuses: ['running'], limit: 1000 }))).toEqual([0]);
        expect(mine(await store.listApprovals({ openOnlyFor: ['pending', 'running', 'waiting', 'paused'], limit: 1000 }))).toEqual([0, 3]);
        expect(mine(await store.listApprovals({ statuses: ['pending'], openOnlyFor: ['running'], limit: 1000 }))).toEqual([0]);
      });
    });

    describe('event log', () => {
      /** Entries as `seq type actor` plus their parsed data. */
      const entries = async (s: Store, taskId: string) =>
        (await s.getEvents(taskId)).map((e) => ({
          seq: e.seq,
          type: e.type,
          actor: `${e.actorKind}:${e.actorId}`,
          at: e.at,
          data: e.data === null ? null : (JSON.parse(e.data) as Record<string, unknown>),
        }));

      it('a batch of checkpoints that consume signals writes what the same writes one by one would, each guarded on its own', async () => {
        const one = await claimedTask(store, ns);
        const batched = await claimedTask(store, ns);
        const stale = await claimedTask(store, ns);
        const signalsOf = async (taskId: string) => {
          for (const name of ['a', 'b', 'c']) await store.insertSignal({ actorKind: 'user', actorId: 'bob', taskId, name, payload: null, idempotencyKey: null, at: T0 + 5 });
          return store.getSignals(taskId);
        };
        const writes = (task: TaskRow, signals: readonly SignalRow[], epoch = task.epoch): WriteOp[] => [
          { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 0, epoch) },
          { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 1, epoch, { kind: 'event' }), consume: { signalId: (signals[0] as SignalRow).id, seq: 1 } },
          { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 2, epoch, { kind: 'event' }), consume: { signalId: (signals[1] as SignalRow).id, seq: 2 } },
          { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 3, epoch) },
        ];
        const oneSignals = await signalsOf(one.id);
        for (const op of writes(one, oneSignals)) expect(await store.writeBatch([op])).toEqual([true]);
        const batchedSignals = await signalsOf(batched.id);
        const staleSignals = await signalsOf(stale.id);
        const [staleWrite] = writes(stale, staleSignals, stale.epoch + 1).slice(1, 2) as [WriteOp];
        expect(await store.writeBatch([...writes(batched, batchedSignals), staleWrite])).toEqual([true, true, true, true, false]);
        // The same journal, the same signals consumed, the same entries numbered without a gap.
        const journal = async (taskId: string) => (await store.getSteps(taskId)).map((r) => ({ ...r, taskId: 'x' }));
        expect(await journal(batched.id)).toEqual(await journal(one.id));
        expect((await store.getSignals(batched.id)).map((x) => x.consumedSeq)).toEqual([1, 2, null]);
        expect((await store.getSignals(one.id)).map((x) => x.consumedSeq)).toEqual([1, 2, null]);
        const log = async (taskId: string, signals: readonly SignalRow[]) =>
          (await entries(store, taskId)).map((e) => ({ ...e, data: e.data && 'signalId' in e.data ? { ...e.data, signalId: signals.findIndex((x) => x.id === e.data?.signalId) } : e.data }));
        const batchedLog = await log(batched.id, batchedSignals);
        expect(batchedLog.map((e) => e.seq)).toEqual(batchedLog.map((_, i) => i + 1));
        expect(batchedLog.map((e) => ({ ...e, at: 0 }))).toEqual((await log(one.id, oneSignals)).map((e) => ({ ...e, at: 0 })));
        expect(batchedLog.filter((e) => e.type === 'signal:consumed').map((e) => e.data)).toEqual([
          { signalId: 0, seq: 1 },
          { signalId: 1, seq: 2 },
        ]);
        // The refused write consumed nothing and wrote nothing.
        expect((await store.getSignals(stale.id)).map((x) => x.consumedSeq)).toEqual([null, null, null]);
        expect(await store.getSteps(stale.id)).toEqual([]);
      });

      it('two writes of one position in a batch, one consuming a signal, write what they would one by one, in either order', async () => {
        for (const consumingFirst of [false, true]) {
          const outcomes: unknown[] = [];
          for (const batched of [false, true]) {
            const task = await claimedTask(store, ns);
            await store.insertSignal({ actorKind: 'user', actorId: 'bob', taskId: task.id, name: 'a', payload: null, idempotencyKey: null, at: T0 + 5 });
            const [signal] = await store.getSignals(task.id);
            const waiting: WriteOp = {
              kind: 'step',
              taskId: task.id,
              epoch: task.epoch,
              step: stepRow(task.id, 0, task.epoch, { status: 'waiting', kind: 'event', output: null, finishedAt: null }),
            };
            const consuming: WriteOp = {
              kind: 'step',
              taskId: task.id,
              epoch: task.epoch,
              step: stepRow(task.id, 0, task.epoch, { kind: 'event' }),
              consume: { signalId: (signal as SignalRow).id, seq: 0 },
            };
            const ops = consumingFirst ? [consuming, waiting] : [waiting, consuming];
            if (batched) expect(await store.writeBatch(ops)).toEqual([true, true]);
            else for (const op of ops) expect(await store.writeBatch([op])).toEqual([true]);
            // (A row written over loses the entry it carried, one by one too: the numbers are compared, not counted.)
            const log = (await entries(store, task.id)).map((e) => ({ seq: e.seq, type: e.type }));
            outcomes.push({
              steps: (await store.getSteps(task.id)).map((r) => ({ ...r, taskId: 'x' })),
              consumed: (await store.getSignals(task.id)).map((x) => x.consumedSeq),
              log,
            });
          }
          expect(outcomes[1]).toEqual(outcomes[0]);
        }
      });

      it('every kind of write appends its entries, numbered 1, 2, 3… per task, with the actor that caused it', async () => {
        const { task } = await store.insertTask(newTask(ns, planCreation({ kind: 'user', id: 'alice' })));
        const other = (await store.insertTask(newTask(ns))).task;
        const [claimed] = await store.claim(claimRequest(ns, { workerId: 'w1', limit: 1 }));
        expect(claimed?.task.id).toBe(task.id);
        const epoch = 1;
        // A plain checkpoint (the hot path), a signal, a checkpoint that consumes it.
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 0, epoch) }])).toEqual([true]);
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'bob', taskId: task.id, name: 'go', payload: '{"ok":true}', idempotencyKey: 'k', at: T0 + 5 })).toEqual({
          created: true,
        });
        const [signal] = await store.getSignals(task.id);
        if (!signal) throw new Error('unreachable');
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 1, epoch, { kind: 'event' }), consume: { signalId: signal.id, seq: 1 } }])).toEqual([
          true,
        ]);
        // Several checkpoints in one batch (two of this task), then a transition carrying journal rows.
        expect(
          await store.writeBatch([
            { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 2, epoch) },
            { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 3, epoch, { status: 'retrying', output: null, finishedAt: null, wakeAt: T0 + 50 }) },
          ]),
        ).toEqual([true, true]);
        const running = await mustGet(store, task.id);
        const failed = await store.transition(
          write(running, {
            event: 'fail',
            to: 'failed',
            guard: { epoch },
            workerId: 'w1',
            at: T0 + 60,
            set: { error: '{"message":"x"}', clearLease: true, finishedAt: T0 + 60 },
            steps: [stepRow(task.id, 3, epoch, { status: 'failed', output: null, error: '{"message":"x"}', finishedAt: T0 + 60 })],
          }),
        );
        if (!failed) throw new Error('unreachable');
        // A user retry that forgets the failed step.
        expect(
          await store.transition(write(failed, { event: 'retry', to: 'pending', at: T0 + 70, set: { runAt: T0 + 70, error: null, finishedAt: null }, deleteSteps: [3] })),
        ).not.toBeNull();
        // A reclaim after the new lease expired, then expiry of the reclaimed lease.
        await store.claim(claimRequest(ns, { workerId: 'w2', now: T0 + 70, limit: 5 }));
        await passLeaseTime(store, [task.id, other.id], LEASE_MS + 1);
        await store.claim(claimRequest(ns, { workerId: 'w3', now: T0 + 70 + LEASE_MS + 1, limit: 5, workflows: [ns.wf()] }));

        const log = await entries(store, task.id);
        expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i + 1));
        expect(log.map((e) => `${e.type} ${e.actor}`)).toEqual([
          'transition user:alice',
          'transition worker:w1',
          'step:completed worker:w1',
          'signal:received user:bob',
          'step:completed worker:w1',
          'signal:consumed worker:w1',
          'step:completed worker:w1',
          'step:retrying worker:w1',
          'step:failed worker:w1',
          'transition worker:w1',
          'step:forgotten user:anonymous',
          'transition user:anonymous',
          'transition worker:w2',
          'transition worker:w3',
        ]);
        expect(log[0]?.data).toEqual({ event: 'create', from: null, to: 'pending' });
        expect(log[1]?.data).toMatchObject({ event: 'claim', from: 'pending', to: 'running', epoch: 1 });
        expect(log[1]?.at).toBe(T0);
        expect(log[2]?.data).toEqual({ ...stepRow(task.id, 0, epoch), taskId: undefined, output: { seq: 0 } });
        expect(log[3]?.data).toEqual({ signalId: signal.id, name: 'go', payload: { ok: true }, idempotencyKey: 'k' });
        expect(log[3]?.at).toBe(T0 + 5);
        expect(log[5]?.data).toEqual({ signalId: signal.id, seq: 1 });
        // A transition's own entry comes after the journal rows it carries.
        expect(log[8]?.data).toMatchObject({ seq: 3, status: 'failed', error: { message: 'x' } });
        expect(log[9]?.data).toMatchObject({ event: 'fail', from: 'running', to: 'failed', error: { message: 'x' } });
        expect(log[9]?.at).toBe(T0 + 60);
        expect(log[10]?.data).toEqual({ seqs: [3] });
        expect(log[11]?.data).toMatchObject({ event: 'retry', to: 'pending' });
        expect(log[12]?.data).toMatchObject({ event: 'claim', from: 'pending', to: 'running', epoch: 2 });
        expect(log[13]?.data).toMatchObject({ event: 'reclaim', from: 'running', to: 'running', epoch: 3, detail: { previousOwner: 'w2' } });
        // The other task's log is its own: created, claimed by w2, then reclaimed by w3.
        expect((await entries(store, other.id)).map((e) => `${e.seq} ${e.type} ${e.actor}`)).toEqual(['1 transition user:anonymous', '2 transition worker:w2', '3 transition worker:w3']);
        // Reads resume after a seq, a page at a time.
        expect((await store.getEvents(task.id, 12)).map((e) => e.seq)).toEqual([13, 14]);
        expect((await store.getEvents(task.id, 2, 3)).map((e) => e.seq)).toEqual([3, 4, 5]);
        expect(await store.getEvents(task.id, 14)).toEqual([]);
      });

      it('lease expiry appends a transition by the system', async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const task = await claimedTask(s, ns, {}, 'w1');
        const now = T0 + LEASE_MS + 1;
        await passLeaseTime(s, [task.id], LEASE_MS + 1);
        expect(await s.expireLeases({ now, event: 'release', from: ['running'], to: 'pending', set: { clearLease: true, runAt: now } })).toBe(1);
        expect((await entries(s, task.id)).map((e) => `${e.seq} ${e.type} ${e.actor}`)).toEqual([
          '1 transition user:anonymous',
          '2 transition worker:w1',
          '3 transition system:lease-expiry',
        ]);
        expect((await entries(s, task.id))[2]?.data).toMatchObject({ event: 'release', from: 'running', to: 'pending', detail: { reason: 'lease expired', previousOwner: 'w1' } });
      });

      it('a refused write appends nothing: stale epoch, lost lease, failed guard, known signal key, known task key', async () => {
        const key = ns.key('once');
        const task = await claimedTask(store, ns, { idempotencyKey: key });
        const before = await logOf(store, task.id);
        expect(before).toEqual(['1:transition:user:anonymous', '2:transition:worker:w1']);
        const stale = task.epoch - 1;
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: stale, step: stepRow(task.id, 0, stale) }])).toEqual([false]);
        expect(
          await store.writeBatch([
            { kind: 'step', taskId: task.id, epoch: stale, step: stepRow(task.id, 0, stale) },
            { kind: 'step', taskId: task.id, epoch: stale, step: stepRow(task.id, 1, stale) },
          ]),
        ).toEqual([false, false]);
        await store.insertSignal({ actorKind: 'user', actorId: 'u', taskId: task.id, name: 'go', payload: null, idempotencyKey: 'sig', at: T0 });
        const [signal] = await store.getSignals(task.id);
        if (!signal) throw new Error('unreachable');
        const withSignal = await logOf(store, task.id);
        expect(withSignal).toHaveLength(3);
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: stale, step: stepRow(task.id, 0, stale), consume: { signalId: signal.id, seq: 0 } }])).toEqual([false]);
        expect(await store.transition(write(task, { event: 'complete', to: 'succeeded', guard: { epoch: stale }, set: { output: '1' }, steps: [stepRow(task.id, 0, stale)] }))).toBeNull();
        expect(await store.transition(write(task, { event: 'abort', from: ['cancelling'], to: 'cancelled' }))).toBeNull();
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'u', taskId: task.id, name: 'go', payload: null, idempotencyKey: 'sig', at: T0 })).toEqual({ created: false });
        expect((await store.insertTask(newTask(ns, { idempotencyKey: key }))).created).toBe(false);
        // Not leased any more (suspended), even at its epoch.
        const paused = await store.transition(write(task, { event: 'suspend', to: 'paused', guard: { epoch: task.epoch }, set: { clearLease: true } }));
        expect(paused?.status).toBe('paused');
        expect(await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) }])).toEqual([false]);
        expect(await logOf(store, task.id)).toEqual([...withSignal, '4:transition:user:anonymous']);
        expect(await store.getSteps(task.id)).toEqual([]);
      });

      it('getEventRanges reads seq ranges of several tasks at once, each as getEvents reads it (carried results with their worker), an unknown task empty', async () => {
        const a = await claimedTask(store, ns, {}, 'w7');
        const b = await claimedTask(store, ns);
        for (const seq of [0, 1, 2]) expect(await store.writeBatch([{ kind: 'step', taskId: a.id, epoch: a.epoch, step: stepRow(a.id, seq, a.epoch) }])).toEqual([true]);
        await store.insertSignal({ actorKind: 'user', actorId: 'bob', taskId: a.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 5 });
        expect(await store.writeBatch([{ kind: 'step', taskId: a.id, epoch: a.epoch, step: stepRow(a.id, 3, a.epoch) }])).toEqual([true]);
        const logA = await store.getEvents(a.id);
        const logB = await store.getEvents(b.id);
        expect(logA.map((e) => e.type)).toEqual(['transition', 'transition', 'step:completed', 'step:completed', 'step:completed', 'signal:received', 'step:completed']);
        expect(logA.filter((e) => e.type === 'step:completed').every((e) => e.actorId === 'w7')).toBe(true);
        const between = (log: EventRow[], after: number, before: number): EventRow[] => log.filter((e) => e.seq > after && e.seq < before);
        const ranges = [
          { taskId: a.id, after: 0, before: 100 },
          { taskId: a.id, after: 2, before: 6 },
          { taskId: b.id, after: 0, before: 3 },
          { taskId: 'no-such-task', after: 0, before: 9 },
          { taskId: a.id, after: 4, before: 5 },
        ];
        expect(await store.getEventRanges(ranges)).toEqual([between(logA, 0, 100), between(logA, 2, 6), between(logB, 0, 3), [], []]);
        expect(await store.getEventRanges([])).toEqual([]);
      });

      it('readLog returns every entry of every task stored on its own (not a step result its journal row carries) exactly once, a page at a time, while writers go on', async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const writer = s;
        const ids: string[] = [];
        const seen: string[] = [];
        const prevOf = new Map<string, number>();
        let cursor: string | null = null;
        let writing = true;
        const writes = (async () => {
          for (let round = 0; round < 8; round++) {
            const created = await Promise.all([0, 1, 2].map(() => writer.insertTask(newTask(ns))));
            ids.push(...created.map((c) => c.task.id));
            const claimed = await writer.claim(claimRequest(ns, { workerId: `w${round}`, limit: 3 }));
            await Promise.all(claimed.map((c) => writer.writeBatch([{ kind: 'step', taskId: c.task.id, epoch: c.task.epoch, step: stepRow(c.task.id, 0, c.task.epoch) }])));
            await writer.writeBatch(claimed.map((c) => ({ kind: 'step' as const, taskId: c.task.id, epoch: c.task.epoch, step: stepRow(c.task.id, 1, c.task.epoch) })));
            await Promise.all(claimed.map((c) => writer.insertSignal({ actorKind: 'user', actorId: 'u', taskId: c.task.id, name: 'x', payload: null, idempotencyKey: null, at: T0 })));
          }
          writing = false;
        })();
        const readPage = async (): Promise<number> => {
          const page: { events: Array<EventRow & { prevSeq: number }>; cursor: string | null } = await s.readLog(cursor, 3);
          expect(page.events.length).toBeLessThanOrEqual(3);
          seen.push(...page.events.map((e) => `${e.taskId}/${e.seq}`));
          for (const e of page.events) prevOf.set(`${e.taskId}/${e.seq}`, e.prevSeq);
          if (page.events.length) expect(page.cursor).not.toBe(cursor);
          cursor = page.cursor;
          return page.events.length;
        };
        while (writing) await readPage();
        await writes;
        const all = (await Promise.all(ids.map((id) => s.getEvents(id)))).flat();
        expect(all.length).toBe(8 * 3 * 5);
        // A step's result is read from its journal row: the cross-task read carries the rest.
        const expected = all.filter((e) => e.type !== 'step:completed' && e.type !== 'step:failed').map((e) => `${e.taskId}/${e.seq}`);
        expect(expected.length).toBe(8 * 3 * 3);
        // Entries of transactions still in flight elsewhere on the server may hold the tail back a
        // while: up to the idle-in-transaction timeout (30 s) behind a stopped process's transaction.
        await eventually(
          async () => {
            while ((await readPage()) > 0);
            return seen.length >= expected.length;
          },
          'the tail of the log',
          60_000,
        );
        expect(seen.length).toBe(new Set(seen).size);
        expect([...seen].sort()).toEqual([...expected].sort());
        // Per task, in seq order, each naming the task's entry before it (the step results between
        // them are the ones the journal rows carry).
        for (const id of ids) {
          const mine = seen.filter((k) => k.startsWith(`${id}/`)).map((k) => Number(k.split('/')[1]));
          expect(mine).toEqual([...mine].sort((x, y) => x - y));
          expect(mine.map((seq) => prevOf.get(`${id}/${seq}`))).toEqual(mine.map((_seq, i) => (i === 0 ? 0 : mine[i - 1])));
        }
        expect(await s.readLog(cursor, 3)).toEqual({ events: [], cursor, behind: false });
        // A mark taken now: once no transaction that was writing when it was taken is running, a
        // read reaches it, with nothing new to hand out.
        const mark = await s.logMark();
        let last: LogPage | undefined;
        await eventually(async () => !(last = await s.readLog(cursor, 3, mark)).behind, 'a read to reach the mark', 60_000);
        expect(last).toEqual({ events: [], cursor, behind: false });
      }, 90_000);
    });

    describe('deleting finished tasks', () => {
      /** A task driven to a final status at `at` (a claimed task fails or succeeds; a pending one is cancelled). */
      async function finished(status: 'succeeded' | 'failed' | 'cancelled', at: number, over: Partial<NewTask> = {}): Promise<TaskRow> {
        if (status === 'cancelled') {
          const { task } = await store.insertTask(newTask(ns, over));
          return (await store.transition(write(task, { event: 'cancel', to: 'cancelled', at, set: { finishedAt: at } }))) as TaskRow;
        }
        const task = await claimedTask(store, ns, over);
        const event = status === 'succeeded' ? 'complete' : 'fail';
        return (await store.transition(write(task, { event, to: status, guard: { epoch: task.epoch }, workerId: 'w1', at, set: { clearLease: true, finishedAt: at } }))) as TaskRow;
      }

      it('a bulk deletion keeps a finished child task while its parent has not ended; by id it deletes it', async () => {
        const parent = await claimedTask(store, ns);
        const child = await finished('succeeded', T0 + 10, { parentId: parent.id, rootId: parent.id, depth: 1 });
        const orphan = await finished('succeeded', T0 + 10, { parentId: ns.id(), rootId: ns.id(), depth: 1 }); // its parent was deleted
        const aged = { statuses: ['succeeded' as const], finishedBefore: T0 + 1000, workflows: [ns.wf()] };
        expect(await store.deleteTasks(aged, 10)).toEqual([{ id: orphan.id, workflow: orphan.workflow, status: 'succeeded' }]);
        expect((await store.getTask(child.id))?.id).toBe(child.id);
        // Once the parent has ended, the child goes with the next deletion.
        await store.transition(
          write(parent, { event: 'complete', to: 'succeeded', guard: { epoch: parent.epoch }, workerId: 'w1', at: T0 + 20, set: { clearLease: true, finishedAt: T0 + 20 } }),
        );
        expect((await store.deleteTasks(aged, 10)).map((t) => t.id).sort()).toEqual([parent.id, child.id].sort());
        const another = await claimedTask(store, ns);
        const byId = await finished('succeeded', T0 + 10, { parentId: another.id, rootId: another.id, depth: 1 });
        expect(await store.deleteTasks({ statuses: ['succeeded'], ids: [byId.id] }, 10)).toEqual([{ id: byId.id, workflow: byId.workflow, status: 'succeeded' }]);
      });

      it('counts the due tasks of a workflow by version: those of none of the versions given', async () => {
        const wf = ns.wf('versions');
        await store.insertTask(newTask(ns, { workflow: wf, workflowVersion: 'v1' }));
        await store.insertTask(newTask(ns, { workflow: wf, workflowVersion: 'v1' }));
        await store.insertTask(newTask(ns, { workflow: wf, workflowVersion: 'v2' }));
        await store.insertTask(newTask(ns, { workflow: wf, workflowVersion: 'v3', runAt: T0 + 10_000 }));
        const due = { statuses: ['pending' as const], workflows: [wf], dueBy: T0 + 1 };
        expect(await store.countTasks(due)).toEqual({ pending: 3 });
        expect(await store.countTasks({ ...due, notVersions: ['v2'] })).toEqual({ pending: 2 });
        expect(await store.countTasks({ ...due, notVersions: ['v1', 'v2'] })).toEqual({});
        expect(await store.countTasks({ ...due, notVersions: ['v1'] })).toEqual({ pending: 1 });
        expect(await store.countTasks({ ...due, dueBy: T0 + 20_000, notVersions: ['v1', 'v2'] })).toEqual({ pending: 1 });
        expect(await store.countTasks({ ...due, notVersions: [] })).toEqual({ pending: 3 });
      });

      it('deletes the finished tasks a deletion selects, oldest id first, up to the limit; counts them first', async () => {
        const old = await finished('succeeded', T0 + 10);
        const oldFailed = await finished('failed', T0 + 20);
        const oldCancelled = await finished('cancelled', T0 + 30);
        const recent = await finished('succeeded', T0 + 5000);
        const running = await claimedTask(store, ns);
        const otherWorkflow = await finished('succeeded', T0 + 40, { workflow: ns.wf('other') });
        const all = ['succeeded', 'failed', 'cancelled'] as const;
        // The store takes every status it is given: the engine passes final ones only.
        const aged = { statuses: [...all, 'running' as const], finishedBefore: T0 + 1000, workflows: [ns.wf()] };
        expect(await store.countTasks(aged)).toEqual({ succeeded: 1, failed: 1, cancelled: 1 });
        expect(await store.countTasks({ ...aged, statuses: ['failed'] })).toEqual({ failed: 1 });
        expect(await store.countTasks({ ...aged, workflows: [] })).toEqual({});

        expect(await store.deleteTasks(aged, 2)).toEqual([
          { id: old.id, workflow: old.workflow, status: 'succeeded' },
          { id: oldFailed.id, workflow: old.workflow, status: 'failed' },
        ]);
        expect(await store.deleteTasks(aged, 10)).toEqual([{ id: oldCancelled.id, workflow: old.workflow, status: 'cancelled' }]);
        expect(await store.deleteTasks(aged, 10)).toEqual([]);
        for (const gone of [old, oldFailed, oldCancelled]) expect(await store.getTask(gone.id)).toBeNull();
        for (const kept of [recent, running, otherWorkflow]) expect((await store.getTask(kept.id))?.id).toBe(kept.id);

        // By id, and below an id (the bound of a scan by creation time).
        expect(await store.deleteTasks({ statuses: all, ids: [recent.id, running.id, ns.id()] }, 10)).toEqual([{ id: recent.id, workflow: recent.workflow, status: 'succeeded' }]);
        const mine = [ns.wf(), ns.wf('other')];
        expect(await store.deleteTasks({ statuses: all, idBefore: otherWorkflow.id, workflows: mine }, 10)).toEqual([]);
        expect((await store.deleteTasks({ statuses: all, idBefore: `${otherWorkflow.id}~`, workflows: mine }, 10)).map((t) => t.id)).toEqual([otherWorkflow.id]);
        expect(await store.deleteTasks({ statuses: all, ids: [] }, 10)).toEqual([]);
        expect((await store.getTask(running.id))?.status).toBe('running');
      });

      it("takes everything a task owns with it (journal, log, signals, approvals, stream chunks) and leaves other tasks' rows alone", async () => {
        const fill = async (): Promise<TaskRow> => {
          const task = await claimedTask(store, ns);
          await store.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) }]);
          await store.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: task.id, name: 'go', payload: '1', idempotencyKey: 'k', at: T0 + 1 });
          await store.insertApproval({
            approval: {
              id: `apv_${randomBytes(6).toString('hex')}`,
              taskId: task.id,
              workflow: task.workflow,
              name: 'review',
              callKey: 'approval:review@0',
              status: 'pending',
              approvers: '[]',
              quorum: 1,
              payload: null,
              policy: '{}',
              deadline: null,
              remindAt: null,
              level: 1,
              decisions: '[]',
              outcome: null,
              version: 1,
              createdAt: T0,
              decidedAt: null,
            },
            epoch: task.epoch,
            at: T0 + 2,
            log: [],
          });
          await store.appendChunks({ taskId: task.id, epoch: task.epoch, chunks: [{ step: 's9', attempt: 1, kind: 'delta', delta: 'x', at: T0 + 3 }] });
          return (await store.transition(
            write(task, { event: 'complete', to: 'succeeded', guard: { epoch: task.epoch }, workerId: 'w1', at: T0 + 4, set: { clearLease: true, finishedAt: T0 + 4 } }),
          )) as TaskRow;
        };
        const doomed = await fill();
        const kept = await fill();
        const owned = async (id: string) => ({
          steps: (await store.getSteps(id)).length,
          log: (await store.getEvents(id)).length,
          signals: (await store.getSignals(id)).length,
          approvals: (await store.listApprovals({ taskId: id, limit: 10 })).length,
          chunks: (await store.getChunks(id, 0, 10)).length,
        });
        const before = await owned(kept.id);
        expect(before).toEqual({ steps: 1, log: expect.any(Number) as number, signals: 1, approvals: 1, chunks: 1 });
        expect(await store.deleteTasks({ statuses: ['succeeded'], ids: [doomed.id] }, 1)).toHaveLength(1);
        expect(await owned(doomed.id)).toEqual({ steps: 0, log: 0, signals: 0, approvals: 0, chunks: 0 });
        expect(await owned(kept.id)).toEqual(before);
        // Nothing can be added to it any more; its idempotency key is free again.
        expect(await store.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: doomed.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 9 })).toBeNull();
        expect(await store.appendTaskEvents?.(doomed.id, T0 + 9, [{ type: 'note', actorKind: 'system', actorId: 'x', data: null }])).not.toBe(true);
      });

      it('frees the idempotency key of a deleted task: the next insert with it creates a new task', async () => {
        const first = await finished('succeeded', T0 + 10, { idempotencyKey: ns.key('report') });
        expect((await store.insertTask(newTask(ns, { idempotencyKey: ns.key('report') }))).created).toBe(false);
        await store.deleteTasks({ statuses: ['succeeded'], ids: [first.id] }, 1);
        const again = await store.insertTask(newTask(ns, { idempotencyKey: ns.key('report') }));
        expect(again.created).toBe(true);
        expect(again.task.id).not.toBe(first.id);
        expect(await logOf(store, again.task.id)).toEqual(['1:transition:user:anonymous']);
      });

      it("a reader of every task's log that read up to the deleted task's last entry misses none appended after it", async () => {
        const s = backend.isolated().open();
        await s.migrate();
        const a = (await s.insertTask(newTask(ns))).task;
        const b = (await s.insertTask(newTask(ns))).task;
        await s.transition(write(b, { event: 'cancel', to: 'cancelled', at: T0 + 5, set: { finishedAt: T0 + 5 } }));
        // Read to the end: the last entry is the deleted task's (its cancel).
        let cursor: string | null = null;
        const seen: string[] = [];
        await eventually(async () => {
          const page: LogPage = await s.readLog(cursor, 100, await s.logMark());
          seen.push(...page.events.map((e) => `${e.taskId}/${e.seq}`));
          cursor = page.cursor;
          return !page.behind && seen.includes(`${b.id}/2`);
        }, 'the log up to the cancel');
        expect(await s.deleteTasks({ statuses: ['cancelled'], ids: [b.id] }, 1)).toHaveLength(1);
        await s.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: a.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 6 });
        const c = (await s.insertTask(newTask(ns))).task;
        const after: string[] = [];
        await eventually(async () => {
          const page: LogPage = await s.readLog(cursor, 100, await s.logMark());
          after.push(...page.events.map((e) => `${e.taskId}/${e.seq}`));
          cursor = page.cursor;
          return !page.behind && after.length >= 2;
        }, 'the entries after the delete');
        expect(after).toEqual([`${a.id}/2`, `${c.id}/1`]);
        // The same once the deleted entries were not the last ones (no row is left behind for them).
        await s.deleteTasks({ statuses: ['pending'], ids: [c.id] }, 1);
        await s.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: a.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 7 });
        await eventually(async () => {
          const page: LogPage = await s.readLog(cursor, 100, await s.logMark());
          after.push(...page.events.map((e) => `${e.taskId}/${e.seq}`));
          cursor = page.cursor;
          return !page.behind && after.length >= 3;
        }, 'the entry after the second delete');
        expect(after).toEqual([`${a.id}/2`, `${c.id}/1`, `${a.id}/3`]);
      });

      it('another connection that read a deleted task reads nothing of it afterwards, though a new task may take its place', async () => {
        const target = backend.isolated();
        const [s1, s2] = [target.open(), target.open()];
        await s1.migrate();
        const doomed = await (async () => {
          const { task } = await s1.insertTask(newTask(ns));
          await s1.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: task.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 1 });
          return (await s1.transition(write(task, { event: 'cancel', to: 'cancelled', at: T0 + 2, set: { finishedAt: T0 + 2 } }))) as TaskRow;
        })();
        // The second connection reads the task (and may remember where it lives).
        expect((await s2.getEvents(doomed.id)).length).toBe(3);
        expect(await s1.deleteTasks({ statuses: ['cancelled'], ids: [doomed.id] }, 1)).toHaveLength(1);
        const next = (await s1.insertTask(newTask(ns))).task;
        await s1.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: next.id, name: 'go', payload: null, idempotencyKey: null, at: T0 + 3 });
        expect(await s2.getEvents(doomed.id)).toEqual([]);
        expect(await s2.getSteps(doomed.id)).toEqual([]);
        expect(await s2.getEventRanges([{ taskId: doomed.id, after: 0, before: 10 }])).toEqual([[]]);
        expect(await s2.appendTaskEvents?.(doomed.id, T0 + 4, [{ type: 'note', actorKind: 'system', actorId: 'x', data: null }])).not.toBe(true);
        expect(await logOf(s2, next.id)).toEqual(['1:transition:user:anonymous', '2:signal:received:user:ada']);
      });
    });

    describe('workflows', () => {
      it('registerWorkflows upserts last-seen times, and listWorkflows lists them by name and version', async () => {
        const a = ns.wf('a');
        const b = ns.wf('b');
        await store.registerWorkflows([
          { name: b, version: '1', at: T0 },
          { name: a, version: '2', at: T0 },
          { name: a, version: '1', at: T0 },
        ]);
        await store.registerWorkflows([{ name: a, version: '1', at: T0 + 50 }]);
        await store.registerWorkflows([]);
        const mine = (await store.listWorkflows()).filter((w) => w.name === a || w.name === b);
        expect(mine).toEqual([
          { name: a, version: '1', lastSeenAt: T0 + 50 },
          { name: a, version: '2', lastSeenAt: T0 },
          { name: b, version: '1', lastSeenAt: T0 },
        ]);
      });

      it('recordPresence refreshes the served versions of a worker and forgets workers seen before the cut; servedVersions counts those seen since', async () => {
        const a = ns.wf('a');
        const w1 = ns.wf('worker-1');
        const w2 = ns.wf('worker-2');
        await store.recordPresence(
          {
            workerId: w1,
            served: [
              { name: a, version: '1' },
              { name: a, version: '2' },
            ],
            at: T0,
          },
          0,
        );
        await store.recordPresence({ workerId: w2, served: [{ name: a, version: '2' }], at: T0 + 10 }, 0);
        expect(await store.servedVersions(a, T0)).toEqual(['1', '2']);
        expect(await store.servedVersions(a, T0 + 5)).toEqual(['2']);
        // A refresh moves the last-seen time; a cut at T0 + 5 forgets worker 1's rows of T0.
        await store.recordPresence({ workerId: w2, served: [{ name: a, version: '2' }], at: T0 + 20 }, T0 + 5);
        expect(await store.servedVersions(a, 0)).toEqual(['2']);
        expect(await store.servedVersions(a, T0 + 15)).toEqual(['2']);
        await store.removePresence(w2);
        expect(await store.servedVersions(a, 0)).toEqual([]);
      });
    });
  });
}

// ── PostgreSQL only: many pools, LISTEN/NOTIFY ───────────────────────────────────────────────

if (wantPostgres)
  describe.skipIf(!postgresUp)('PostgreSQL store across processes', () => {
    const schema = freshSchemaName('sw_conf_pg');
    const open = (poolSize = 4): PostgresStore => track(new PostgresStore(PG_URL, { schema, poolSize }));
    let ns: Namespace;

    beforeAll(async () => {
      const s = new PostgresStore(PG_URL, { schema });
      await s.migrate();
      await s.close();
    });
    afterAll(() => dropSchema(schema));
    beforeEach(() => {
      ns = namespace();
    });

    it('concurrent appenders of one task on separate connections number its log 1..n, without gaps or duplicates', async () => {
      const stores = [open(6), open(6), open(6)];
      const pick = (i: number): PostgresStore => stores[i % stores.length] as PostgresStore;
      for (let round = 0; round < 3; round++) {
        const task = await claimedTask(pick(0), ns);
        const epoch = task.epoch;
        const other = await claimedTask(pick(1), ns);
        const ops: Array<Promise<unknown>> = [];
        for (let i = 0; i < 50; i++) {
          ops.push(pick(i).insertSignal({ actorKind: 'user', actorId: `u${i}`, taskId: task.id, name: `s${i}`, payload: String(i), idempotencyKey: null, at: T0 + i }));
          // Parallel branches of the run checkpoint their own positions: lone (the hot path) and batched
          // (two of this task with one of another task, in one statement).
          if (i % 2) ops.push(pick(i + 1).writeBatch([{ kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, i, epoch) }]));
          else {
            ops.push(
              pick(i + 2).writeBatch([
                { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, i, epoch) },
                { kind: 'step', taskId: other.id, epoch: other.epoch, step: stepRow(other.id, i, other.epoch) },
                { kind: 'step', taskId: task.id, epoch, step: stepRow(task.id, 100 + i, epoch) },
              ]),
            );
          }
          if (i === 25) ops.push(pick(i).transition(write(task, { event: 'cancel', to: 'cancelling', set: { cancelReason: 'stop' } })));
        }
        const results = await Promise.all(ops);
        expect(results.filter((r) => r === null)).toEqual([]); // every write accepted (cancelling is still leased)
        const log = await pick(2).getEvents(task.id);
        const expected = 2 + 50 + 25 + 25 * 2 + 1;
        expect(log.map((e) => e.seq)).toEqual(Array.from({ length: expected }, (_, i) => i + 1));
        const count = (type: string): number => log.filter((e) => e.type === type).length;
        expect([count('transition'), count('signal:received'), count('step:completed')]).toEqual([3, 50, 75]);
        expect((await pick(2).getEvents(other.id)).map((e) => e.seq)).toEqual(Array.from({ length: 2 + 25 }, (_, i) => i + 1));
        const counter = await withPg(async (c) => (await c.query(`SELECT event_seq FROM "${schema}".task_heads WHERE id = $1`, [task.id])).rows[0].event_seq as number);
        expect(counter).toBe(expected);
      }
    });

    it("a batch of end-of-run transitions numbers each task's entries after its own log", async () => {
      const a = open();
      const one = await claimedTask(a, ns);
      const two = await claimedTask(a, ns);
      await a.writeBatch([{ kind: 'step', taskId: two.id, epoch: two.epoch, step: stepRow(two.id, 0, two.epoch) }]);
      const results = await a.writeBatch([
        write(one, {
          event: 'complete',
          to: 'succeeded',
          guard: { epoch: one.epoch },
          workerId: 'w1',
          set: { output: '1', clearLease: true, finishedAt: T0 },
          steps: [stepRow(one.id, 0, one.epoch), stepRow(one.id, 1, one.epoch)],
        }),
        write(two, {
          event: 'complete',
          to: 'succeeded',
          guard: { epoch: two.epoch },
          workerId: 'w1',
          set: { output: '2', clearLease: true, finishedAt: T0 },
          steps: [stepRow(two.id, 1, two.epoch)],
        }),
        write(two, { event: 'complete', to: 'succeeded', guard: { epoch: two.epoch - 1 }, workerId: 'w1', set: { output: '3' } }),
      ]);
      expect(results.map((r) => (r && typeof r === 'object' ? r.status : r))).toEqual(['succeeded', 'succeeded', null]);
      expect(await logOf(a, one.id)).toEqual(['1:transition:user:anonymous', '2:transition:worker:w1', '3:step:completed:worker:w1', '4:step:completed:worker:w1', '5:transition:worker:w1']);
      expect(await logOf(a, two.id)).toEqual(['1:transition:user:anonymous', '2:transition:worker:w1', '3:step:completed:worker:w1', '4:step:completed:worker:w1', '5:transition:worker:w1']);
    });

    it('two stores claiming concurrently from 200 due tasks never claim the same task twice', async () => {
      const a = open(6);
      const b = open(6);
      const ids = new Set<string>();
      for (let i = 0; i < 200; i++) ids.add((await a.insertTask(newTask(ns, { runAt: T0 - i }))).task.id);
      const claimed: string[] = [];
      for (let round = 0; claimed.length < 200; round++) {
        if (round > 50) throw new Error(`only ${claimed.length} of 200 tasks claimed`);
        const batches = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 ? a : b).claim(claimRequest(ns, { workerId: `w${i}`, limit: 3 }))));
        const got = batches.flat();
        if (!got.length) break;
        claimed.push(...got.map((c) => c.task.id));
        expect(got.every((c) => c.task.epoch === 1 && c.event === 'claim')).toBe(true);
      }
      expect(claimed).toHaveLength(200);
      expect(new Set(claimed)).toEqual(ids);
      const claimRows = await withPg(
        async (c) =>
          (await c.query(`SELECT count(*)::int AS n FROM "${schema}".events WHERE type = 'transition' AND data::json->>'event' = 'claim' AND task_id = ANY($1)`, [[...ids]])).rows[0]
            .n as number,
      );
      expect(claimRows).toBe(200);
    });

    it('a concurrency cap holds when many workers on two stores claim at once', async () => {
      const a = open(6);
      const b = open(6);
      for (let i = 0; i < 40; i++) await a.insertTask(newTask(ns));
      const batches = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).claim(claimRequest(ns, { workerId: `w${i}`, limit: 2, concurrency: { [ns.wf()]: 5 } }))));
      expect(batches.flat()).toHaveLength(5);
      expect(await a.listTasks({ workflow: ns.wf(), statuses: ['running'], limit: 100 })).toHaveLength(5);
    });

    it('a zombie step write racing a reclaim is either refused or lands before the reclaim reads the journal', async () => {
      const a = open();
      const b = open();
      for (let round = 0; round < 20; round++) {
        const task = await claimedTask(a, ns, {}, 'zombie');
        await passLeaseTime(a, [task.id], LEASE_MS);
        // A claim skips a task whose step write is in flight (SKIP LOCKED), so the heir tries again.
        const reclaim = async (): Promise<ClaimedTask | undefined> => {
          for (let i = 0; i < 1000; i++) {
            const [got] = await b.claim(claimRequest(ns, { now: T0 + LEASE_MS, workerId: 'heir', limit: 1 }));
            if (got) return got;
          }
          return undefined;
        };
        const [write, reclaimed] = await Promise.all([a.writeBatch([{ kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) }]), reclaim()]);
        expect(reclaimed?.task.id).toBe(task.id);
        // Accepted writes are in the journal the new run replays; refused ones are nowhere.
        expect(reclaimed?.steps.length).toBe(write[0] ? 1 : 0);
        expect(await a.getSteps(task.id)).toHaveLength(write[0] ? 1 : 0);
        await a.transition(write_(reclaimed?.task));
      }
      function write_(task: TaskRow | undefined): TransitionWrite {
        if (!task) throw new Error('unreachable');
        return write(task, { event: 'complete', to: 'succeeded', guard: { epoch: task.epoch }, set: { clearLease: true } });
      }
    });

    it('a signal racing the park that starts waiting for it is never lost', async () => {
      const a = open();
      const b = open();
      for (let round = 0; round < 30; round++) {
        const task = await claimedTask(a, ns);
        await Promise.all([
          a.transition(write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, at: T0 + 100, set: { clearLease: true, runAt: null, waitEvents: ['ready'] } })),
          b.insertSignal({ actorKind: 'user', actorId: 'anonymous', taskId: task.id, name: 'ready', payload: null, idempotencyKey: null, at: T0 + 200 }),
        ]);
        const after = await mustGet(a, task.id);
        expect(after.status).toBe('waiting');
        expect(after.runAt).not.toBeNull();
        await a.transition(write(after, { event: 'cancel', to: 'cancelled', set: { finishedAt: T0 + 300 } }));
      }
    });

    it('two stores deleting the same finished tasks at once delete each once; a signal racing a deletion lands with its task or is refused, never orphaned', async () => {
      const [a, b] = [open(4), open(4)];
      const cancelledTask = async (): Promise<string> => {
        const { task } = await a.insertTask(newTask(ns));
        await a.transition(write(task, { event: 'cancel', to: 'cancelled', at: T0 + 1, set: { finishedAt: T0 + 1 } }));
        return task.id;
      };
      const ids = await Promise.all(Array.from({ length: 60 }, cancelledTask));
      const selection = { statuses: ['cancelled' as const], workflows: [ns.wf()] };
      const drain = async (s: Store): Promise<string[]> => {
        const got: string[] = [];
        for (let batch = await s.deleteTasks(selection, 7); batch.length; batch = await s.deleteTasks(selection, 7)) got.push(...batch.map((t) => t.id));
        return got;
      };
      const [byA, byB] = await Promise.all([drain(a), drain(b)]);
      expect([...byA, ...byB].sort()).toEqual([...ids].sort());

      // A deletion that took its snapshot before a signal committed, and locked the task just after,
      // would leave the signal and its log entry behind: rounds of signals racing deletions.
      for (let round = 0; round < 4; round++) {
        const raced = await Promise.all(Array.from({ length: 40 }, cancelledTask));
        const [, answers] = await Promise.all([
          drain(b),
          Promise.all(raced.map((id) => a.insertSignal({ actorKind: 'user', actorId: 'ada', taskId: id, name: 'late', payload: null, idempotencyKey: null, at: T0 + 2 }))),
        ]);
        for (const [i, id] of raced.entries()) {
          const task = await a.getTask(id);
          // A refused signal found no task; a recorded one is with its task, or went with it.
          if (answers[i] === null) expect(task).toBeNull();
          if (task) expect((await a.getSignals(id)).map((x) => x.name)).toEqual(['late']);
        }
        await drain(b);
      }
      const schemaOf = `"${a.schema}"`;
      const orphans = await withPg(
        async (c) =>
          (
            await c.query<{ n: number }>(
              `SELECT (SELECT count(*) FROM ${schemaOf}.signals s WHERE NOT EXISTS (SELECT 1 FROM ${schemaOf}.tasks t WHERE t.id = s.task_id))
            + (SELECT count(*) FROM ${schemaOf}.events e WHERE NOT EXISTS (SELECT 1 FROM ${schemaOf}.tasks t WHERE t.id = e.task_id)) AS n`,
            )
          ).rows[0]?.n,
      );
      expect(Number(orphans)).toBe(0);
    });

    it('of many signals sent at once with onlyIfAwaited to a waiting task, from several stores, exactly one is recorded', async () => {
      const stores = [open(4), open(4), open(4)];
      for (let round = 0; round < 5; round++) {
        const task = await claimedTask(stores[0] as Store, ns, { workflow: ns.wf(`round${round}`) });
        await (stores[0] as Store).transition(
          write(task, { event: 'park', to: 'waiting', guard: { epoch: task.epoch }, set: { clearLease: true, runAt: null, waitEvents: ['approve', 'reject'] } }),
        );
        const answers = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            (stores[i % 3] as Store).insertSignal({
              actorKind: 'user',
              actorId: `u${i}`,
              taskId: task.id,
              name: i % 2 ? 'approve' : 'reject',
              payload: null,
              idempotencyKey: null,
              at: T0 + i,
              onlyIfAwaited: true,
            }),
          ),
        );
        expect(answers.filter((a) => a?.created)).toHaveLength(1);
        expect(await (stores[1] as Store).getSignals(task.id)).toHaveLength(1);
      }
    });

    it('a notification from one store reaches a subscriber of another', async () => {
      const listening = open();
      const sending = open();
      const received: WakeEvent[] = [];
      const unsubscribe = await listening.subscribe((e) => received.push(e));
      const event: WakeEvent = { reason: 'cancel', taskId: ns.id(), workflow: ns.wf() };
      await sending.notify(event);
      await eventually(() => received.length > 0, 'the notification');
      expect(received).toEqual([event]);
      await unsubscribe();
    });

    it('a listener whose connection is killed reconnects, asks for a poll, and receives later notifications', async () => {
      const listening = open();
      const sending = open();
      const received: WakeEvent[] = [];
      const unsubscribe = await listening.subscribe((e) => received.push(e));
      const killed = await withPg(async (c) => (await c.query(`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${listening.channel}"`])).rows);
      expect(killed).toEqual([{ ok: true }]);
      await eventually(() => received.some((e) => e.taskId === '*'), 'the poll request after reconnecting');
      expect(received).toEqual([{ reason: 'task', taskId: '*' }]);
      const event: WakeEvent = { reason: 'task', taskId: ns.id() };
      await sending.notify(event);
      await eventually(() => received.length > 1, 'a notification after reconnecting');
      expect(received).toEqual([{ reason: 'task', taskId: '*' }, event]);
      await unsubscribe();
    });

    it('finished tasks are announced apart from work: each topic hears only its own, both after a reconnect', async () => {
      const listening = open();
      const sending = open();
      const work: WakeEvent[] = [];
      const settled: WakeEvent[] = [];
      const offWork = await listening.subscribe((e) => work.push(e), 'work');
      const offSettled = await listening.subscribe((e) => settled.push(e), 'settled');
      const done: WakeEvent = { reason: 'settled', taskId: ns.id(), workflow: ns.wf() };
      const ready: WakeEvent = { reason: 'task', taskId: ns.id(), workflow: ns.wf() };
      await sending.notify(done);
      await sending.notify(ready);
      // A finished task announced by a batched end-of-run transition travels the same way, in the
      // batch's one notification of finished tasks.
      const task = await claimedTask(sending, ns);
      const [row] = await sending.writeBatch([
        write(task, { event: 'complete', to: 'succeeded', guard: { epoch: task.epoch }, set: { clearLease: true, finishedAt: T0 }, notify: { reason: 'settled', taskId: task.id } }),
        { kind: 'step', taskId: task.id, epoch: task.epoch, step: stepRow(task.id, 0, task.epoch) },
      ]);
      expect(row).toMatchObject({ status: 'succeeded' });
      await eventually(() => settled.length >= 2 && work.length >= 1, 'both topics');
      await new Promise((r) => setTimeout(r, 100)); // nothing else arrives
      expect(settled).toEqual([done, { reason: 'settled', taskId: '*', taskIds: [task.id] }]);
      expect(work).toEqual([ready]);
      // After its connection is killed, the settled listener is told to look again as a settled event.
      await withPg(async (c) => c.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${listening.settledChannel}"`]));
      await eventually(() => settled.some((e) => e.taskId === '*' && !e.taskIds), 'the look-again after reconnecting');
      expect(settled.at(-1)).toEqual({ reason: 'settled', taskId: '*' });
      expect(work).toEqual([ready]);
      await offWork();
      await offSettled();
    });

    it('unsubscribe ends the listening connection and stops delivery; close ends every listener', async () => {
      const listening = open();
      const sending = open();
      const received: WakeEvent[] = [];
      const listenConnections = (): Promise<number> =>
        withPg(async (c) => (await c.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = $1`, [`LISTEN "${listening.channel}"`])).rows[0].n as number);
      const unsubscribe = await listening.subscribe((e) => received.push(e));
      await listening.subscribe(() => undefined);
      expect(await listenConnections()).toBe(2);
      await unsubscribe();
      await sending.notify({ reason: 'task', taskId: ns.id() });
      await eventually(async () => (await listenConnections()) === 1, 'the unsubscribed connection to end');
      expect(received).toEqual([]);
      await listening.close();
      await eventually(async () => (await listenConnections()) === 0, 'close to end the listener');
      await expect(listening.getTask('x')).rejects.toMatchObject({ code: 'CLOSED' });
    });

    it('an unreachable server surfaces as StoreUnavailableError; a bad schema name as InvalidArgumentError', async () => {
      const down = track(new PostgresStore('postgres://postgres@127.0.0.1:1/test', { schema }));
      const err = await down.getTask('x').then(
        () => null,
        (e: unknown) => e,
      );
      expect(isStepwiseError(err, 'STORE_UNAVAILABLE')).toBe(true);
      expect((err as Error).message).toContain('127.0.0.1:1');
      expect(() => new PostgresStore(PG_URL, { schema: 'bad-name"; DROP' })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    });
  });
