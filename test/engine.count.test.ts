// engine.count: tasks by status, of some workflows, due now, or up to a cap per status; the
// operators' metrics count with it (a scrape's work stays bounded however many tasks there are).
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { ServerMetrics } from '../src/server/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { TEST_STORE, makeEngine, startWorker, waitForStatus } from './support/engine.ts';

const quick = workflow('quick', async (ctx) => ctx.step('one', () => 1));
const parked = workflow('parked', async (ctx) => ctx.waitForEvent('go'));

describe(`counting tasks (${TEST_STORE})`, () => {
  it('counts by status, workflow and due time, every status asked for answered, and each up to a cap', async () => {
    const clock = new ManualClock();
    const engine = makeEngine({ workflows: [quick, parked], clock });
    const metrics = new ServerMetrics();
    metrics.watchEngine(engine);
    for (let i = 0; i < 3; i++) await engine.start(quick);
    await engine.start(quick, undefined, { delay: '1h' });
    const worker = await startWorker(engine, { workflows: ['parked'] });
    const waiting = (await engine.start(parked)).id;
    await waitForStatus(engine, waiting, 'waiting');
    await worker.stop();

    expect(await engine.count()).toEqual({ pending: 4, running: 0, waiting: 1, paused: 0, cancelling: 0, succeeded: 0, failed: 0, cancelled: 0 });
    expect(await engine.count({ status: ['pending', 'waiting'], workflow: 'quick' })).toEqual({ pending: 4, waiting: 0 });
    expect(await engine.count({ status: 'pending', due: true })).toEqual({ pending: 3 });
    expect(await engine.count({ status: ['pending', 'waiting'], cap: 2 })).toEqual({ pending: 2, waiting: 1 });
    await clock.advance('1h');
    expect(await engine.count({ status: 'pending', due: true })).toEqual({ pending: 4 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('stepwise_tasks{status="pending"} 4');
    expect(text).toContain('stepwise_tasks{status="waiting"} 1');
    expect(text).toContain('stepwise_queue_depth 4');

    await expect(engine.count({ status: 'finished' as never })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    await expect(engine.count({ cap: 0 })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    await expect(engine.count({ workflow: [''] })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
  });
});
