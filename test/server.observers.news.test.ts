// The operators' observers hear idempotency records met and dwell alerts (not only the task's log).
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import pino from 'pino';
import { workflow, type Observer } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { createLogObserver, ServerMetrics } from '../src/server/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

function collectingLogger(): { logger: pino.Logger; lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _e, done) {
      for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, sink), lines };
}

describe('operator observers: idempotency and dwell news', () => {
  it('logs an idempotency hit as JSON, with its key and backend', async () => {
    const { logger, lines } = collectingLogger();
    const engine = makeEngine({ observers: [createLogObserver(logger)] });
    await engine.idempotency.run('charge:order-1', () => 'r-1');
    await engine.idempotency.run('charge:order-1', () => 'r-2');
    await engine.close();
    expect(lines.filter((l) => String(l.msg).startsWith('idempotency'))).toEqual([expect.objectContaining({ msg: 'idempotency hit', key: 'charge:order-1', taskId: null })]);
  });

  it('tells observers of a dwell alert once per stay: a log line, a Prometheus counter and the onDwellAlert hook', async () => {
    const clock = new ManualClock();
    const { logger, lines } = collectingLogger();
    const metrics = new ServerMetrics();
    const alerts: unknown[] = [];
    const hook: Observer = { name: 'test', onDwellAlert: (a) => void alerts.push(a) };
    const wf = workflow('slow-reviewers-news', async (ctx) => ctx.waitForEvent('first'), { dwell: { waiting: { after: '1h', then: 'alert' } } });
    const engine = makeEngine({ workflows: [wf], clock, observers: [createLogObserver(logger), metrics.observer, hook] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, 'waiting');
    await clock.advance('1h');
    for (let i = 0; i < 500 && !alerts.length; i++) {
      await clock.advance('1s');
      await new Promise((r) => setTimeout(r, 5));
    }
    for (let i = 0; i < 5; i++) await clock.advance('1s'); // more scans: no second alert for this stay
    await new Promise((r) => setTimeout(r, 50));
    expect(alerts).toEqual([expect.objectContaining({ taskId: id, workflow: 'slow-reviewers-news', status: 'waiting', afterMs: 3_600_000 })]);
    expect(lines.filter((l) => l.msg === 'dwell alert')).toEqual([expect.objectContaining({ taskId: id, workflow: 'slow-reviewers-news', status: 'waiting', afterMs: 3_600_000 })]);
    expect(await metrics.registry.metrics()).toContain('stepwise_dwell_alerts_total{workflow="slow-reviewers-news",status="waiting"} 1');
    await engine.close();
  });
});
