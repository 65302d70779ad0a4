// A write the database refuses for its content (PostgreSQL SQLSTATE class 22/23, SQLite
// SQLITE_CONSTRAINT) cannot succeed by retrying: the step's task fails with STORE_REFUSED, a
// command rejects with it, and the worker is never stuck retrying. The up-front validation keeps
// ordinary bad values out, so these tests make the real database refuse chosen values (a CHECK
// constraint on PostgreSQL, a trigger on SQLite) — the same path a refusal the validation does not
// foresee would take.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { isStepwiseError, workflow, type Engine } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker, tempDbUrl } from './support/engine.ts';
import { sql } from './support/postgres.ts';

/** Makes the store behind `url` refuse step rows named `poison`, inputs and signal payloads containing "poison". */
async function refusePoison(engine: Engine, url: string): Promise<void> {
  await engine.ready();
  if (TEST_STORE === 'postgres') {
    const schema = new URL(url).searchParams.get('schema') as string;
    await sql(`ALTER TABLE "${schema}".steps ADD CONSTRAINT refuse_poison CHECK (name <> 'poison')`);
    await sql(`ALTER TABLE "${schema}".tasks ADD CONSTRAINT refuse_poison CHECK (position('poison' in coalesce(input, '')) = 0)`);
    await sql(`ALTER TABLE "${schema}".signals ADD CONSTRAINT refuse_poison CHECK (position('poison' in coalesce(payload, '')) = 0)`);
    return;
  }
  const db = new Database(url.slice('sqlite:'.length));
  try {
    for (const op of ['INSERT', 'UPDATE']) {
      db.exec(`CREATE TRIGGER refuse_poison_step_${op} BEFORE ${op} ON stepwise_steps WHEN NEW.name = 'poison' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`);
      db.exec(
        `CREATE TRIGGER refuse_poison_task_${op} BEFORE ${op} ON stepwise_tasks WHEN instr(coalesce(NEW.input, ''), 'poison') > 0 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`,
      );
      db.exec(
        `CREATE TRIGGER refuse_poison_signal_${op} BEFORE ${op} ON stepwise_signals WHEN instr(coalesce(NEW.payload, ''), 'poison') > 0 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`,
      );
    }
  } finally {
    db.close();
  }
}

describe(`writes the store refuses (${TEST_STORE})`, () => {
  it('fails the task with STORE_REFUSED when a step checkpoint is refused, instead of retrying it forever', async () => {
    const effects: string[] = [];
    const middle = workflow('refused-middle', async (ctx) => {
      await ctx.step('poison', () => void effects.push('poison'));
      await ctx.step('after', () => void effects.push('after'));
      return 'done';
    });
    const last = workflow('refused-last', async (ctx) => {
      await ctx.step('fine', () => 1);
      return ctx.step('poison', () => 2);
    });
    const plain = workflow('plain', async () => 'ok');
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [middle, last, plain] });
    await refusePoison(engine, url);
    const worker = await startWorker(engine);
    const errors: unknown[] = [];
    worker.on('worker:error', (e) => errors.push(e.error));

    for (const wf of [middle.name, last.name]) {
      const { id } = await engine.start(wf, undefined);
      const failure = await engine.result(id, { timeout: '30s' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isStepwiseError(failure, 'TASK_FAILED')).toBe(true);
      const cause = (failure as Error).cause;
      expect(isStepwiseError(cause, 'STORE_REFUSED')).toBe(true);
      expect((cause as Error).message).toMatch(new RegExp(`task ${id}.*refused`));
      const info = await engine.get(id);
      expect(info.status).toBe('failed');
      expect(info.runs).toBe(1); // failed in its first run: not handed back to be run again
    }
    // The step after the refused checkpoint never started; the refused one ran once.
    expect(effects).toEqual(['poison']);
    // Refusals are not store outages: no checkpoint was retried.
    expect(errors.filter((e) => isStepwiseError(e, 'STORE_UNAVAILABLE'))).toEqual([]);
    // The worker is not wedged: it still runs tasks, and stops within its grace.
    const next = await engine.start(plain, undefined);
    expect(await engine.result(next.id, { timeout: '30s' })).toBe('ok');
    await worker.stop({ graceMs: 1000 });
    expect(worker.state).toBe('stopped');
  }, 60_000);

  it('rejects a command whose write the store refuses with STORE_REFUSED, naming the store', async () => {
    const wf = workflow('refused-commands', async (ctx) => ctx.waitForEvent('go', { timeout: '1h' }));
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf] });
    await refusePoison(engine, url);
    const started = await engine.start(wf, { note: 'poison' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isStepwiseError(started, 'STORE_REFUSED')).toBe(true);
    expect((started as { retryable?: unknown }).retryable).toBe(false);
    expect((started as Error).message).toContain(TEST_STORE === 'postgres' ? 'PostgreSQL' : 'SQLite');

    const { id } = await engine.start(wf, { note: 'fine' });
    const signalled = await engine.signal(id, 'go', { note: 'poison' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(isStepwiseError(signalled, 'STORE_REFUSED')).toBe(true);
    // Nothing half-written: the task is still waiting to start, and a cancel still works.
    expect((await engine.get(id)).status).toBe('pending');
    await engine.cancel(id, { reason: 'test over' });
    expect((await engine.get(id)).status).toBe('cancelled');
  });
});
