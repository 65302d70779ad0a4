import { describe, expect, it } from 'vitest';
import { workflow, type AttemptInfo, type RunInfo, type WorkerEvents } from '../src/index.ts';
import { NewsBus } from '../src/news.ts';
import { WorkerNewsDesk } from '../src/worker/news.ts';
import { makeEngine, startWorker } from './support/engine.ts';

describe('the in-process news bus', () => {
  it('hands each news to the listeners of its type in order, hears only types listened to, and stops a listener on off', () => {
    const bus = new NewsBus();
    const seen: string[] = [];
    expect(bus.hears('task:ready')).toBe(false);
    const offA = bus.on('task:ready', (n) => seen.push(`a:${n.taskId}:${n.workflow}`));
    bus.on('task:ready', (n) => seen.push(`b:${n.taskId}`));
    bus.on('task:cancel', (n) => seen.push(`cancel:${n.taskId}:${n.reason}`));
    expect(bus.hears('task:ready')).toBe(true);
    expect(bus.hears('task:pause')).toBe(false);
    bus.publish({ type: 'task:ready', taskId: 't1', workflow: 'wf' });
    bus.publish({ type: 'task:cancel', taskId: 't1', reason: 'no' });
    bus.publish({ type: 'task:pause', taskId: 't1' });
    offA();
    bus.publish({ type: 'task:ready', taskId: 't2', workflow: null });
    expect(seen).toEqual(['a:t1:wf', 'b:t1', 'cancel:t1:no', 'b:t2']);
  });

  it('reports a listener that throws as a process warning and still calls the others', async () => {
    const bus = new NewsBus();
    const warnings: Array<{ message: string; code?: string }> = [];
    const onWarning = (w: Error & { code?: string }): number => warnings.push({ message: w.message, code: w.code });
    process.on('warning', onWarning);
    try {
      const seen: string[] = [];
      bus.on('log:appended', () => {
        throw new Error('listener broke');
      });
      bus.on('log:appended', (n) => seen.push(n.taskId));
      expect(() => bus.publish({ type: 'log:appended', taskId: 't1' })).not.toThrow();
      expect(seen).toEqual(['t1']);
      await new Promise((r) => setImmediate(r));
      expect(warnings).toContainEqual({ message: 'A "log:appended" listener threw: listener broke', code: 'STEPWISE_LISTENER' });
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a listener that unsubscribes while news is handed out does not make another one miss it', () => {
    const bus = new NewsBus();
    const seen: string[] = [];
    const off = bus.on('task:resume', () => {
      seen.push('first');
      off();
    });
    bus.on('task:resume', () => seen.push('second'));
    bus.publish({ type: 'task:resume', taskId: 't' });
    bus.publish({ type: 'task:resume', taskId: 't' });
    expect(seen).toEqual(['first', 'second', 'second']);
  });
});

describe("a worker's side of the bus", () => {
  it('publishes its news with the run it came from, hands its listeners only its own payloads, and leaves the bus when closed', () => {
    const bus = new NewsBus();
    const a = new WorkerNewsDesk(bus, 'a');
    const b = new WorkerNewsDesk(bus, 'b');
    const heard: string[] = [];
    const news: unknown[] = [];
    bus.on('lease:lost', (n) => news.push(n));
    a.on('lease:lost', (p) => heard.push(`a:${p.taskId}`));
    b.on('lease:lost', (p) => heard.push(`b:${p.taskId}`));
    const run = { taskId: 't1', workflow: 'wf', epoch: 3, workerId: 'a', reclaimed: false };
    a.emitFor(run)('lease:lost', { taskId: 't1', epoch: 3 });
    expect(heard).toEqual(['a:t1']);
    expect(news).toEqual([{ type: 'lease:lost', workerId: 'a', run, payload: { taskId: 't1', epoch: 3 } }]);
    a.close();
    b.close();
    expect(bus.hears('worker:stopped')).toBe(false);
    a.on('worker:stopped', () => undefined);
    expect(bus.hears('worker:stopped')).toBe(true);
    a.close();
    expect(bus.hears('worker:stopped')).toBe(false);
  });
});

describe("one engine's news seen by worker.on and by observers", () => {
  it("gives worker.on only that worker's news with today's payloads, and observers every run with its context", async () => {
    const runs: RunInfo[] = [];
    const attempts: AttemptInfo[] = [];
    const ends: Array<RunInfo & { status: string }> = [];
    const wf = workflow('news-two-workers', async (ctx) => ctx.step('only', () => 'done'));
    const engine = makeEngine({
      workflows: [wf],
      observers: [{ name: 'test', onRunStart: (r) => void runs.push(r), onStepEnd: (a) => void attempts.push(a), onRunEnd: (r) => void ends.push(r) }],
    });
    const w1 = engine.worker({ pollIntervalMs: 20, concurrency: 1 });
    const w2 = engine.worker({ pollIntervalMs: 20, concurrency: 1 });
    const claimed1: Array<WorkerEvents['run:claimed']> = [];
    const claimed2: Array<WorkerEvents['run:claimed']> = [];
    const completed1: Array<WorkerEvents['step:completed']> = [];
    const completed2: Array<WorkerEvents['step:completed']> = [];
    w1.on('run:claimed', (e) => claimed1.push(e));
    w2.on('run:claimed', (e) => claimed2.push(e));
    w1.on('step:completed', (e) => completed1.push(e));
    w2.on('step:completed', (e) => completed2.push(e));
    await w1.start();
    await w2.start();
    const ids = await Promise.all(Array.from({ length: 6 }, () => engine.start('news-two-workers').then((s) => s.id)));
    for (const id of ids) expect(await engine.result(id)).toBe('done');
    await w1.stop();
    await w2.stop();

    // Each worker heard its own runs only, with the payload it always had.
    const all = [...claimed1, ...claimed2];
    expect(all.map((e) => e.taskId).sort()).toEqual([...ids].sort());
    for (const e of all) expect(Object.keys(e).sort()).toEqual(['epoch', 'reclaimed', 'taskId', 'workflow']);
    for (const e of [...completed1, ...completed2]) expect(Object.keys(e).sort()).toEqual(['attempt', 'durationMs', 'idempotencyKey', 'step', 'taskId']);
    expect(completed1.map((e) => e.taskId).sort()).toEqual(claimed1.map((e) => e.taskId).sort());
    expect(completed2.map((e) => e.taskId).sort()).toEqual(claimed2.map((e) => e.taskId).sort());

    // Observers saw every run, named by the worker that ran it, and each attempt with its run.
    expect(runs.map((r) => r.taskId).sort()).toEqual([...ids].sort());
    for (const r of runs) {
      const by = claimed1.some((e) => e.taskId === r.taskId) ? w1.id : w2.id;
      expect(r).toEqual({ taskId: r.taskId, workflow: 'news-two-workers', epoch: 1, workerId: by, reclaimed: false });
      expect(attempts.find((a) => a.taskId === r.taskId)).toMatchObject({ ...r, step: 'only', attempt: 1 });
      expect(ends.find((e) => e.taskId === r.taskId)).toMatchObject({ ...r, status: 'succeeded' });
    }
  });

  it('drops the listeners of a stopped worker from the engine bus after its worker:stopped', async () => {
    const wf = workflow('news-stop', async () => 'ok');
    const engine = makeEngine({ workflows: [wf] });
    const w = await startWorker(engine);
    const events: string[] = [];
    w.on('worker:stopping', () => events.push('stopping'));
    w.on('worker:stopped', () => events.push('stopped'));
    const before = await startWorker(engine); // another worker of the same engine keeps its listener
    before.on('worker:stopped', () => events.push('other stopped'));
    await w.stop();
    expect(events).toEqual(['stopping', 'stopped']);
    await before.stop();
    expect(events).toEqual(['stopping', 'stopped', 'other stopped']);
  });
});
