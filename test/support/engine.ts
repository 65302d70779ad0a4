// An engine on a fresh store per test, closed (workers stopped) after each test: a SQLite file,
// or with STEPWISE_TEST_STORE=postgres a fresh PostgreSQL schema (the engine suites run on both).
import { afterAll, afterEach } from 'vitest';
import { PG_URL, dropSchema, freshSchemaName } from './postgres.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ManualClock } from '../../src/manual-clock.ts';
import type { Store, WriteOp, WriteResult } from '../../src/store.ts';
import { Engine, type EngineOptions, type TaskInfo, type TaskStatus, type TransitionEvent, type Worker, type WorkerOptions } from '../../src/index.ts';

/** Which backend the engine suites run on. */
export const TEST_STORE = (process.env.STEPWISE_TEST_STORE ?? 'sqlite') as 'sqlite' | 'postgres';

const engines: Engine[] = [];
const dirs: string[] = [];
const schemas: string[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const s of schemas.splice(0)) await dropSchema(s);
});

export function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'stepwise-test-'));
  dirs.push(d);
  return d;
}

/** A store URL nobody else uses: a SQLite file, or a PostgreSQL schema (dropped after the test). */
export function tempDbUrl(): string {
  if (TEST_STORE === 'postgres') {
    const schema = freshSchemaName('sw_engine');
    schemas.push(schema);
    return `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  }
  return `sqlite:${join(tempDir(), 'stepwise.db')}`;
}

export function makeEngine(options: EngineOptions = {}): Engine {
  const engine = new Engine({ store: tempDbUrl(), ...options });
  engines.push(engine);
  return engine;
}

/** Fast settings for tests: short polls and heartbeats. */
export const FAST: WorkerOptions = { pollIntervalMs: 20, heartbeatMs: 50, leaseMs: 2000, cancelGraceMs: 500, shutdownGraceMs: 500 };

export async function startWorker(engine: Engine, options: WorkerOptions = {}): Promise<Worker> {
  const worker = engine.worker({ ...FAST, ...options });
  await worker.start();
  return worker;
}

/** Polls until the task reaches one of the statuses (or throws after `ms`). */
export async function waitForStatus(engine: Engine, id: string, statuses: TaskStatus | TaskStatus[], ms = 10_000): Promise<void> {
  const want = Array.isArray(statuses) ? statuses : [statuses];
  const deadline = Date.now() + ms;
  for (;;) {
    const t = await engine.get(id);
    if (want.includes(t.status)) return;
    if (Date.now() > deadline) throw new Error(`task ${id} is ${t.status}, expected ${want.join('|')}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Polls until `check()` is true. */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A promise with its resolve function, for steps that wait on the test. */
export function gate<T = void>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

/**
 * Fresh schema names for one test file (call at its top level): each call of the returned function
 * gives a new name, and every schema named is dropped after the file's tests.
 */
export function schemasOfThisFile(prefix: string): () => string {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });
  return () => {
    const schema = freshSchemaName(prefix);
    schemas.push(schema);
    return schema;
  };
}

/** The `transition` entries of a task's log: its lifecycle, without step and signal entries. */
export function transitionsOf(info: TaskInfo): TransitionEvent[] {
  return info.history.filter((e): e is TransitionEvent => e.type === 'transition');
}

/** Moves the engine clock a second at a time (a little real time between) until `check` holds. */
export async function advanceUntil(clock: ManualClock, check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await clock.advance('1s');
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`never reached: ${what}`);
}

/**
 * `inner`, with every write going through `writeBatch` (no synchronous `writeBatchNow`), which
 * first awaits `before(ops)`: a test holds or interleaves with a write there.
 */
export function beforeEachWrite(inner: Store, before: (ops: readonly WriteOp[]) => Promise<void> | void): Store {
  return aroundEachWrite(inner, async (ops, write) => {
    await before(ops);
    return write(ops);
  });
}

/**
 * `inner`, with every write going through `writeBatch` (no synchronous `writeBatchNow`), made by
 * `around(ops, write)`: `write` is the store's own; a test delays it, or fails after it (an answer
 * lost after the commit).
 */
export function aroundEachWrite(inner: Store, around: (ops: readonly WriteOp[], write: (ops: readonly WriteOp[]) => Promise<WriteResult[]>) => Promise<WriteResult[]>): Store {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'writeBatchNow') return undefined;
      if (prop === 'writeBatch') return (ops: readonly WriteOp[]) => around(ops, (o) => inner.writeBatch(o));
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
