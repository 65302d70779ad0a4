// The operators' observers on a real engine and worker: pino JSON logs, and OpenTelemetry spans
// recorded by a small tracer written against @opentelemetry/api (the API's own context handling runs).
import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import pino from 'pino';
import { trace, type Attributes, type Context, type Span, type SpanOptions, type SpanStatus, type Tracer } from '@opentelemetry/api';
import { workflow } from '../src/index.ts';
import { createLogObserver, createTracingObserver, ServerMetrics } from '../src/server/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { review, summarize } from './fixtures/server-workflows.ts';

/** A pino logger whose JSON lines are collected in `lines`. */
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

interface Recorded {
  name: string;
  attributes: Attributes;
  parent: Recorded | null;
  status: SpanStatus | null;
  exceptions: number;
  ended: boolean;
}

/** A tracer that keeps its spans; the parent is what the API's context carries. */
function recordingTracer(): { tracer: Tracer; spans: Recorded[] } {
  const spans: Recorded[] = [];
  const byContext = new WeakMap<object, Recorded>();
  const tracer = {
    startSpan(name: string, options: SpanOptions = {}, ctx?: Context): Span {
      const parentSpan = ctx ? trace.getSpan(ctx) : undefined;
      const r: Recorded = { name, attributes: { ...(options.attributes ?? {}) }, parent: parentSpan ? (byContext.get(parentSpan) ?? null) : null, status: null, exceptions: 0, ended: false };
      spans.push(r);
      const span: Span = {
        spanContext: () => ({ traceId: '0'.repeat(32), spanId: String(spans.length).padStart(16, '0'), traceFlags: 1 }),
        setAttribute: (k, v) => ((r.attributes[k] = v), span),
        setAttributes: (a) => (Object.assign(r.attributes, a), span),
        addEvent: () => span,
        addLink: () => span,
        addLinks: () => span,
        setStatus: (s) => ((r.status = s), span),
        updateName: () => span,
        end: () => void (r.ended = true),
        isRecording: () => !r.ended,
        recordException: () => void r.exceptions++,
      };
      byContext.set(span, r);
      return span;
    },
    startActiveSpan: () => {
      throw new Error('not used');
    },
  } as unknown as Tracer;
  return { tracer, spans };
}

describe('operator observers', () => {
  it('logs every transition with its actor and every attempt as JSON, and traces task → step → attempt', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const sink = new Writable({
      write(chunk: Buffer, _e, done) {
        for (const l of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
        done();
      },
    });
    const logger = pino({ level: 'info' }, sink);
    const { tracer, spans } = recordingTracer();
    let calls = 0;
    const flaky = workflow('flaky', async (ctx) => {
      await ctx.step(
        'fetch',
        () => {
          if (++calls === 1) throw new Error('upstream 503');
          return 'ok';
        },
        { retry: { maxAttempts: 3, initialDelay: 1, jitter: false } },
      );
      return 'done';
    });
    const engine = makeEngine({ workflows: [flaky], observers: [createLogObserver(logger), await createTracingObserver({ tracer })] });
    await startWorker(engine);
    const t = await engine.start(flaky, undefined, { by: 'ada' });
    expect(await t.result()).toBe('done');
    await engine.close();

    const transitions = lines.filter((l) => l.msg === 'transition');
    expect(transitions[0]).toMatchObject({ taskId: t.id, event: 'create', to: 'pending', actor: { kind: 'user', id: 'ada' } });
    expect(transitions.map((l) => l.event)).toEqual(expect.arrayContaining(['create', 'claim', 'complete']));
    expect(lines.find((l) => l.msg === 'step attempt failed, retrying')).toMatchObject({ taskId: t.id, workflow: 'flaky', step: 'fetch', attempt: 1, error: { message: 'upstream 503' } });
    expect(lines.find((l) => l.msg === 'step completed')).toMatchObject({ taskId: t.id, step: 'fetch', attempt: 2 });

    const task = spans.filter((s) => s.name === 'stepwise.task flaky');
    expect(task.length).toBeGreaterThanOrEqual(1);
    const step = spans.find((s) => s.name === 'stepwise.step fetch') as Recorded;
    expect(task).toContain(step.parent);
    expect(step.attributes['gen_ai.operation.name']).toBe('execute_tool');
    const attempts = spans.filter((s) => s.name.startsWith('stepwise.attempt fetch'));
    expect(attempts.map((a) => a.attributes['stepwise.attempt'])).toEqual([1, 2]);
    expect(attempts.every((a) => a.parent === step)).toBe(true);
    expect(attempts[0]?.exceptions).toBe(1);
    expect(attempts[0]?.status?.code).toBe(2);
    expect(spans.every((s) => s.ended)).toBe(true);
    expect(task[0]?.attributes).toMatchObject({ 'stepwise.task.id': t.id, 'gen_ai.agent.name': 'flaky', 'gen_ai.operation.name': 'invoke_agent' });
  });

  it('logs approval notices (requested, decided) and each decision with the approver as actor, without payload, comment or data', async () => {
    const { logger, lines } = collectingLogger();
    const engine = makeEngine({ workflows: [review], observers: [createLogObserver(logger)] });
    await startWorker(engine);
    const t = await engine.start(review, { title: 'secret plans' });
    await waitForStatus(engine, t.id, 'waiting');
    const [approval] = (await engine.get(t.id)).approvals;
    const id = approval?.id as string;
    await engine.decide(id, { approve: true, by: 'alice', comment: 'private remark', data: { text: 'confidential edit' }, idempotencyKey: 'k-1' });
    expect(await engine.result(t.id)).toMatchObject({ published: true, text: 'confidential edit' });
    await engine.close();

    expect(lines.find((l) => l.msg === 'approval requested')).toMatchObject({
      taskId: t.id,
      workflow: 'review',
      approvalId: id,
      approval: 'publish',
      status: 'pending',
      approvers: ['alice'],
      level: 1,
      deadline: null,
    });
    expect(lines.find((l) => l.msg === 'approval decided')).toMatchObject({ taskId: t.id, approvalId: id, status: 'approved', approved: true, by: 'alice', timedOut: false, decisions: 1 });
    const decisions = lines.filter((l) => l.msg === 'approval decision');
    expect(decisions).toHaveLength(1);
    expect(decisions[0]).toMatchObject({ taskId: t.id, approvalId: id, approval: 'publish', approve: true, actor: { kind: 'user', id: 'alice' }, idempotencyKey: 'k-1' });
    const text = JSON.stringify(lines);
    for (const secret of ['secret plans', 'private remark', 'confidential edit']) expect(text).not.toContain(secret);
  });

  it('logs each model call and counts tokens, cost and calls in Prometheus metrics from the usage entries', async () => {
    const { logger, lines } = collectingLogger();
    const metrics = new ServerMetrics();
    const engine = makeEngine({ workflows: [summarize, review], observers: [createLogObserver(logger), metrics.observer] });
    await startWorker(engine);
    for (const pages of [1, 4]) await (await engine.start(summarize, { pages })).result();
    const t = await engine.start(review, { title: 'x' });
    await waitForStatus(engine, t.id, 'waiting');
    await engine.decide((await engine.get(t.id)).approvals[0]?.id as string, { approve: false, by: 'alice' });
    await engine.result(t.id);
    await engine.close();

    expect(lines.filter((l) => l.msg === 'model call').map((l) => [l.step, l.inputTokens, l.outputTokens])).toEqual([
      ['read', 1200, 300],
      ['write', 800, 400],
      ['read', 4800, 300],
      ['write', 800, 400],
    ]);
    expect(lines.find((l) => l.msg === 'model call')).toMatchObject({ model: 'house-model', outcome: 'succeeded', attempt: 1, costUsd: 0.0021 });
    const text = await metrics.registry.metrics();
    // Input: 1200 + 800 + 4800 + 800; output: 4 × 300 / 400; cost at $1 / $3 per million.
    expect(text).toContain('stepwise_model_tokens_total{workflow="summarize",model="house-model",kind="input"} 7600');
    expect(text).toContain('stepwise_model_tokens_total{workflow="summarize",model="house-model",kind="output"} 1400');
    const cost = Number(/stepwise_model_cost_usd_total\{workflow="summarize",model="house-model"\} ([\d.e-]+)/.exec(text)?.[1]);
    expect(cost).toBeCloseTo(0.0076 + 0.0042, 10);
    expect(text).toContain('stepwise_model_calls_total{workflow="summarize",model="house-model",outcome="succeeded"} 4');
    expect(text).toContain('stepwise_approval_decisions_total{approve="false"} 1');
  });

  it('logs and counts deleted tasks: which, why and by whom (a deleted task has no log of its own left)', async () => {
    const { logger, lines } = collectingLogger();
    const metrics = new ServerMetrics();
    const engine = makeEngine({ workflows: [summarize], observers: [createLogObserver(logger), metrics.observer] });
    await startWorker(engine);
    const a = await engine.start(summarize, { pages: 1 });
    const b = await engine.start(summarize, { pages: 2 });
    await Promise.all([a.result(), b.result()]);
    await engine.delete(a.id, { by: 'dpo' });
    expect(await engine.purge({ olderThan: 0, by: { kind: 'system', id: 'nightly' } })).toMatchObject({ count: 1 });
    await engine.close();

    expect(lines.filter((l) => l.msg === 'tasks deleted')).toEqual([
      expect.objectContaining({ reason: 'delete', actor: { kind: 'user', id: 'dpo' }, count: 1, tasks: [{ taskId: a.id, workflow: 'summarize', status: 'succeeded' }] }),
      expect.objectContaining({ reason: 'purge', actor: { kind: 'system', id: 'nightly' }, count: 1, tasks: [{ taskId: b.id, workflow: 'summarize', status: 'succeeded' }] }),
    ]);
    const text = await metrics.registry.metrics();
    expect(text).toContain('stepwise_tasks_deleted_total{workflow="summarize",status="succeeded",reason="delete"} 1');
    expect(text).toContain('stepwise_tasks_deleted_total{workflow="summarize",status="succeeded",reason="purge"} 1');
  });
});
