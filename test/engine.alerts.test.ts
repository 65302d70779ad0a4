// Alerts: a workflow failing again and again, a workflow with due tasks and no live worker, a task
// in a crash loop — each raised once per subject and quiet period across every worker of the
// store (two engines watch the same store), to observers' onAlert and to a webhook.
import { describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { ERROR_CODES, Engine, workflow, type Alert } from '../src/index.ts';
import { ServerMetrics } from '../src/server/index.ts';
import { FAST, TEST_STORE, eventually, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

const failing = workflow('failing', async (ctx) => ctx.step('call', () => Promise.reject(new Error('upstream broke'))), { retry: 1 });

async function webhook(): Promise<{ url: string; received: Alert[]; close: () => void }> {
  const received: Alert[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      received.push((JSON.parse(body) as { alert: Alert }).alert);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`, received, close: () => server.close() };
}

describe(`alerts (${TEST_STORE})`, () => {
  it('raises a failure-rate alert once across two workers, to observers and the webhook', async () => {
    const hook = await webhook();
    const url = tempDbUrl();
    const seen: Alert[] = [];
    // minFinished is the number of tasks the test starts, so the alert cannot be raised before the
    // last of them ends (with fewer, a busy machine lets it fire at 3 of 3).
    const alerts = { every: '200ms', failureRate: { window: '1h', threshold: 0.5, minFinished: 4 }, webhook: { url: hook.url } } as const;
    // One metrics observer on both engines: it counts whichever raised the alert.
    const metrics = new ServerMetrics();
    const a = makeEngine({ store: url, workflows: [failing], alerts, observers: [{ onAlert: (x) => void seen.push(x) }, metrics.observer] });
    const b = makeEngine({ store: url, workflows: [failing], alerts, observers: [{ onAlert: (x) => void seen.push(x) }, metrics.observer] });
    const wa = await startWorker(a);
    const wb = await startWorker(b);
    try {
      for (let i = 0; i < 4; i++) await waitForStatus(a, (await a.start(failing, {})).id, 'failed');
      await eventually(() => seen.length >= 1 && hook.received.length >= 1, 15_000, 'the alert');
      // Both workers keep looking: still one alert in this quiet period.
      await new Promise((r) => setTimeout(r, 1000));
      expect(seen).toHaveLength(1);
      expect(hook.received).toHaveLength(1);
      expect(seen[0]).toMatchObject({ kind: 'failure-rate', subject: 'workflow:failing', workflow: 'failing', data: { failed: 4, ended: 4 } });
      expect(seen[0]?.message).toContain('4 of the 4 tasks');
      expect(hook.received[0]).toMatchObject({ kind: 'failure-rate', subject: 'workflow:failing' });
      expect(await metrics.registry.metrics()).toContain('stepwise_alerts_total{kind="failure-rate"} 1');
      // Listed once, from either engine, with the worker that raised it.
      const listed = await b.alerts();
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ kind: 'failure-rate', subject: 'workflow:failing', workflow: 'failing', taskId: null, data: { failed: 4, ended: 4 }, at: seen[0]!.at });
      expect([wa.id, wb.id]).toContain(listed[0]!.raisedBy);
      expect(await a.alerts({ kind: ['crash-loop', 'stuck'] })).toEqual([]);
      expect(await a.alerts({ workflow: 'failing', kind: 'failure-rate' })).toEqual(listed);
      expect(await a.alerts({ before: listed[0]!.id })).toEqual([]);
      await expect(a.alerts({ kind: 'failure' as never })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringContaining('failure-rate, crash-loop') });
      await expect(a.alerts({ limit: 0 })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      await expect(a.alerts({ kind: [] })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      await expect(a.alerts({ kind: 7 as never })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      await expect(a.alerts({ worklow: 'failing' } as never)).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
    } finally {
      await wa.stop();
      await wb.stop();
      hook.close();
    }
  });

  it('raises workers-gone for a workflow with due tasks and no live worker', async () => {
    const url = tempDbUrl();
    const orphan = workflow('orphan', async () => 1);
    const other = workflow('other', async () => 1);
    const old = makeEngine({ store: url, workflows: [orphan] });
    const w = await startWorker(old);
    await w.stop(); // registered once, now gone
    await old.start(orphan, {});
    const seen: Alert[] = [];
    const watcher = makeEngine({ store: url, workflows: [other], alerts: { every: '200ms', failureRate: false }, observers: [{ onAlert: (x) => void seen.push(x) }] });
    const ww = await startWorker(watcher);
    try {
      await eventually(() => seen.some((x) => x.kind === 'workers-gone'), 15_000, 'the workers-gone alert');
      expect(seen.find((x) => x.kind === 'workers-gone')).toMatchObject({ subject: 'workflow:orphan', message: expect.stringContaining('no live worker serves it') });
      expect(seen.some((x) => x.workflow === 'other')).toBe(false);
    } finally {
      await ww.stop();
    }
  });

  it('raises workers-gone for due tasks of a version no live worker serves, while workers of another version live', async () => {
    const url = tempDbUrl();
    const v1 = workflow('pinned', async () => 1, { version: '1' });
    const v2 = workflow('pinned', async () => 2, { version: '2' });
    const old = makeEngine({ store: url, workflows: [v1] });
    const w = await startWorker(old);
    await w.stop(); // version 1's workers are gone
    const { id } = await old.start(v1, {});
    const seen: Alert[] = [];
    const current = makeEngine({ store: url, workflows: [v2], alerts: { every: '200ms', failureRate: false }, observers: [{ onAlert: (x) => void seen.push(x) }] });
    const w2 = await startWorker(current);
    try {
      await eventually(() => seen.some((x) => x.kind === 'workers-gone'), 15_000, 'the workers-gone alert');
      expect(seen.find((x) => x.kind === 'workers-gone')).toMatchObject({
        subject: 'workflow:pinned',
        data: { liveVersions: ['2'] },
        message: expect.stringContaining('under a version no live worker serves (live workers serve 2)'),
      });
      // Not run by the version-2 worker, and explain names the version it waits for.
      expect((await current.get(id)).status).toBe('pending');
      expect((await current.explain(id)).summary).toContain('version 1');
    } finally {
      await w2.stop();
    }
  });

  it('raises no workers-gone alert while live workers serve the due tasks of every version', async () => {
    const url = tempDbUrl();
    const v1 = workflow('served', async (ctx) => ctx.waitForEvent('go'), { version: '1' });
    const v2 = workflow('served', async (ctx) => ctx.waitForEvent('go'), { version: '2', compatibleVersions: ['1'] });
    // Holds the one slot of the live worker, so that the tasks of "served" stay due while the monitor looks.
    let free!: () => void;
    const held = new Promise<void>((resolve) => (free = resolve));
    const hog = workflow('hog', async (ctx) => ctx.step('hold', () => held));
    // A control: a workflow no worker serves, whose alert shows the monitor has looked at the store.
    const orphan = workflow('unserved', async () => 'never');
    const old = makeEngine({ store: url, workflows: [v1, orphan] });
    await (await startWorker(old)).stop(); // registered once, now gone
    const seen: Alert[] = [];
    const current = makeEngine({ store: url, workflows: [v2, hog], alerts: { every: '100ms', failureRate: false }, observers: [{ onAlert: (x) => void seen.push(x) }] });
    const w2 = await startWorker(current, { concurrency: 1 });
    try {
      const h = await current.start(hog, {});
      await waitForStatus(current, h.id, 'running');
      // Due, under version 1 (which version 2 replays) and version 2, with the slot taken.
      const { id } = await old.start(v1, {});
      const due2 = await current.start(v2, {});
      await old.start(orphan, {});
      // Once the monitor raised the control's alert, it has looked at "served" with its tasks due too.
      await eventually(() => seen.some((x) => x.subject === 'workflow:unserved'), 15_000, "the control's workers-gone alert");
      await new Promise((r) => setTimeout(r, 300)); // and a few rounds more (every 100 ms)
      expect((await current.get(id)).status).toBe('pending');
      expect((await current.get(due2.id)).status).toBe('pending');
      expect(seen.filter((x) => x.kind === 'workers-gone').map((x) => x.subject)).toEqual(['workflow:unserved']);
      // Served indeed: once the slot is free, version 2's code runs the version-1 task.
      free();
      await waitForStatus(current, id, 'waiting');
    } finally {
      free();
      await w2.stop();
    }
  });

  it('raises a crash loop when a task is taken over after its worker died', async () => {
    const url = tempDbUrl();
    let hang = true;
    const stuck = workflow('stuck', async (ctx) => ctx.step('work', () => (hang ? new Promise(() => undefined) : 'done')));
    const seen: Alert[] = [];
    const alerts = { every: '1h', crashLoop: { reclaims: 1 } } as const;
    const first = new Engine({ store: url, workflows: [stuck] });
    const dying = first.worker({ ...FAST, leaseMs: 1000 });
    await dying.start();
    const { id } = await first.start(stuck, {});
    await waitForStatus(first, id, 'running');
    dying.abandon(); // its heartbeats stop: the lease runs out
    hang = false;
    const second = makeEngine({ store: url, workflows: [stuck], alerts, observers: [{ onAlert: (x) => void seen.push(x) }] });
    const w2 = await startWorker(second);
    try {
      expect(await second.result(id, { timeout: '20s' })).toBe('done');
      await eventually(() => seen.length === 1, 10_000, 'the crash-loop alert');
      expect(seen[0]).toMatchObject({ kind: 'crash-loop', subject: `task:${id}`, taskId: id, data: { epoch: 2 } });
    } finally {
      await w2.stop();
      await first.close().catch(() => undefined);
    }
  });

  it('raises a budget alert once when a task has spent most of its model budget', async () => {
    const seen: Alert[] = [];
    // Each step reports 300 tokens of a 1,000-token budget: the third takes it to 90%.
    const spender = workflow(
      'spender',
      async (ctx) => {
        for (let i = 0; i < 3; i++) {
          await ctx.step('call', async (s) => {
            await ctx.usage(s, { model: 'm', inputTokens: 200, outputTokens: 100 });
            return i;
          });
        }
        return 'done';
      },
      { budget: { tokens: 1000 } },
    );
    const engine = makeEngine({ workflows: [spender], alerts: { budget: { share: 0.8 } }, observers: [{ onAlert: (x) => void seen.push(x) }] });
    await startWorker(engine);
    const { id } = await engine.start(spender);
    expect(await engine.result(id)).toBe('done');
    await eventually(() => seen.length >= 1, 10_000, 'the budget alert');
    await new Promise((r) => setTimeout(r, 200));
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ kind: 'budget', subject: `task:${id}`, taskId: id, workflow: 'spender', data: { spent: { tokens: 900 }, budget: { tokens: 1000 } } });
    expect(seen[0]?.message).toContain('900 of its 1000 tokens (90%)');
  });

  it('refuses a mistyped or impossible alert option', () => {
    const invalid = { code: ERROR_CODES.INVALID_ARGUMENT };
    expect(() => new Engine({ store: tempDbUrl(), alerts: { failurerate: {} } as never })).toThrow(expect.objectContaining(invalid));
    expect(() => new Engine({ store: tempDbUrl(), alerts: { failureRate: { threshold: 2 } } })).toThrow(/threshold/);
    expect(() => new Engine({ store: tempDbUrl(), alerts: { webhook: { url: 'ftp://x' } } })).toThrow(/http\(s\) URL/);
    expect(() => new Engine({ store: tempDbUrl(), alerts: { budget: { share: 1.5 } } })).toThrow(/alerts.budget.share/);
    expect(() => new Engine({ store: tempDbUrl(), alerts: { budget: { shar: 0.5 } as never } })).toThrow(/unknown option "shar"/);
  });
});
