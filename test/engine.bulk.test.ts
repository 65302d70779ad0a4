// Bulk actions on a filter: a dry run counts what the action would take and changes nothing; the
// action then runs on every matching task, page by page, each logged with the actor; tasks it does
// not apply to are skipped, a limit stops it (saying so), bad options are refused.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const parked = workflow('parked', async (ctx) => ctx.waitForEvent('go'));
let failing = true;
const flaky = workflow(
  'flaky',
  async (ctx) =>
    ctx.step('call', () => {
      if (failing) throw Object.assign(new Error('upstream said 429'), { code: 'RATE_LIMITED' });
      return 'ok';
    }),
  { retry: 1 },
);

describe(`bulk actions (${TEST_STORE})`, () => {
  it('counts first, then cancels every matching task as one actor; others are untouched', async () => {
    const engine = makeEngine({ workflows: [parked] });
    const worker = await startWorker(engine);
    const acme: string[] = [];
    const other: string[] = [];
    try {
      for (let i = 0; i < 7; i++) acme.push((await engine.start(parked, {}, { tags: { tenant: 'acme' } })).id);
      for (let i = 0; i < 2; i++) other.push((await engine.start(parked, {}, { tags: { tenant: 'globex' } })).id);
      for (const id of [...acme, ...other]) await waitForStatus(engine, id, 'waiting');
      const filter = { tags: { tenant: 'acme' }, status: 'waiting' as const };
      const plan = await engine.bulk({ action: 'cancel', filter, dryRun: true });
      expect(plan).toMatchObject({ action: 'cancel', dryRun: true, matched: 7, acted: 7, skippedCount: 0, failedCount: 0, truncated: false });
      expect((await engine.count({ status: 'waiting' })).waiting).toBe(9);

      const done = await engine.bulk({ action: 'cancel', filter, reason: 'tenant offboarded', by: 'ops' });
      expect(done).toMatchObject({ matched: 7, acted: 7, failedCount: 0 });
      for (const id of acme) {
        await waitForStatus(engine, id, 'cancelled');
        const t = await engine.get(id);
        expect(t.cancelReason).toBe('tenant offboarded');
        expect(t.history.find((e) => e.type === 'transition' && e.event === 'cancel')?.actor).toEqual({ kind: 'user', id: 'ops' });
      }
      for (const id of other) expect((await engine.get(id)).status).toBe('waiting');

      // Delete them (finished), skipping what is not finished.
      const deleted = await engine.bulk({ action: 'delete', filter: { tags: { tenant: 'acme' } } });
      expect(deleted).toMatchObject({ matched: 7, acted: 7 });
      expect((await engine.list({ tags: { tenant: 'acme' } })).tasks).toEqual([]);
      const notFinished = await engine.bulk({ action: 'delete', filter: { tags: { tenant: 'globex' } } });
      expect(notFinished).toMatchObject({ matched: 2, acted: 0, skippedCount: 2 });
      expect(notFinished.skipped.map((s) => s.status)).toEqual(['waiting', 'waiting']);
    } finally {
      await worker.stop();
    }
  });

  it('pauses and resumes pending tasks by filter, stopping at a limit and saying so', async () => {
    const engine = makeEngine({ workflows: [parked] });
    for (let i = 0; i < 5; i++) await engine.start(parked, {}, { tags: { batch: 'b1' } });
    const some = await engine.bulk({ action: 'pause', filter: { tags: { batch: 'b1' } }, limit: 2 });
    expect(some).toMatchObject({ matched: 2, acted: 2, truncated: true });
    const rest = await engine.bulk({ action: 'pause', filter: { tags: { batch: 'b1' }, status: 'pending' } });
    expect(rest).toMatchObject({ matched: 3, acted: 3, truncated: false });
    expect((await engine.count({ status: ['paused', 'pending'] })).paused).toBe(5);
    expect(await engine.bulk({ action: 'resume', filter: { status: 'paused' } })).toMatchObject({ acted: 5 });
    expect((await engine.count({ status: 'pending' })).pending).toBe(5);
  });

  it('retries the tasks that failed with an error code once the cause is fixed', async () => {
    failing = true;
    const engine = makeEngine({ workflows: [flaky] });
    const worker = await startWorker(engine);
    try {
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push((await engine.start(flaky, {})).id);
      for (const id of ids) await waitForStatus(engine, id, 'failed');
      failing = false;
      expect(await engine.bulk({ action: 'retry', filter: { failedWith: 'RATE_LIMITED' } })).toMatchObject({ matched: 3, acted: 3 });
      for (const id of ids) expect(await engine.result(id, { timeout: '10s' })).toBe('ok');
      // Succeeded tasks are skipped by a retry without fromStep.
      expect(await engine.bulk({ action: 'retry', filter: { workflow: 'flaky' } })).toMatchObject({ matched: 3, acted: 0, skippedCount: 3 });
    } finally {
      await worker.stop();
    }
  });

  it('refuses an unknown action or option, and options of another action', async () => {
    const engine = makeEngine({ workflows: [parked] });
    const invalid = { code: ERROR_CODES.INVALID_ARGUMENT };
    await expect(engine.bulk({ action: 'kill' as never, filter: {} })).rejects.toMatchObject(invalid);
    await expect(engine.bulk({ action: 'pause', filter: {}, reason: 'x' })).rejects.toMatchObject(invalid);
    await expect(engine.bulk({ action: 'cancel', filter: { limit: 5 } as never })).rejects.toMatchObject(invalid);
    await expect(engine.bulk({ action: 'cancel', filter: {}, dryrun: true } as never)).rejects.toMatchObject({ ...invalid, message: expect.stringContaining('unknown option "dryrun"') });
    await expect(engine.bulk({ action: 'cancel', filter: { tagz: {} } as never })).rejects.toMatchObject({ ...invalid, message: expect.stringContaining('unknown option "tagz"') });
  });
});
