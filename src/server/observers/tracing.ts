/**
 * @module server/observers/tracing
 * OpenTelemetry spans through `@opentelemetry/api` only (no SDK is forced on users: without a
 * registered tracer provider the API's tracer records nothing). One span per run of a task
 * (`stepwise.task`), a child per step (`stepwise.step`) that lasts across its attempts in that run,
 * and a child of that per attempt (`stepwise.attempt`), with the GenAI semantic-convention
 * attributes that apply to an agent's steps (`gen_ai.operation.name`, `gen_ai.agent.name`).
 * @example
 * const engine = new Engine({ observers: [await createTracingObserver()] });
 */
import type { Span, Tracer } from '@opentelemetry/api';
import { InvalidArgumentError, type Observer } from '../../index.ts';

export interface TracingOptions {
  /** @defaultValue the global provider's tracer named "stepwise" */
  tracer?: Tracer;
}

/**
 * Loads `@opentelemetry/api` (an optional peer dependency: importing the server never needs it)
 * and returns the observer.
 */
export async function createTracingObserver(options: TracingOptions = {}): Promise<Observer> {
  let api: typeof import('@opentelemetry/api');
  try {
    api = await import('@opentelemetry/api');
  } catch (e) {
    throw new InvalidArgumentError('createTracingObserver() needs the optional peer dependency @opentelemetry/api: npm install @opentelemetry/api.', { cause: e });
  }
  const { context, SpanStatusCode, trace } = api;
  const tracer = options.tracer ?? trace.getTracer('stepwise');
  const tasks = new Map<string, Span>();
  const steps = new Map<string, Span>();
  const attempts = new Map<string, Span>();
  const stepKey = (taskId: string, step: string): string => `${taskId}\u0000${step}`;
  const attemptKey = (taskId: string, step: string, n: number): string => `${taskId}\u0000${step}\u0000${n}`;
  const endStep = (taskId: string, step: string, error?: Error): void => {
    const span = steps.get(stepKey(taskId, step));
    if (!span) return;
    if (error) span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
    span.end();
    steps.delete(stepKey(taskId, step));
  };
  return {
    name: 'opentelemetry',
    onRunStart: (r) => {
      tasks.set(
        r.taskId,
        tracer.startSpan(`stepwise.task ${r.workflow}`, {
          attributes: {
            'stepwise.task.id': r.taskId,
            'stepwise.workflow': r.workflow,
            'stepwise.epoch': r.epoch,
            'stepwise.worker.id': r.workerId,
            'stepwise.reclaimed': r.reclaimed,
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.name': r.workflow,
          },
        }),
      );
    },
    onRunEnd: (r) => {
      for (const [key, span] of [...attempts, ...steps]) {
        if (key.startsWith(`${r.taskId}\u0000`)) {
          span.end();
          attempts.delete(key);
          steps.delete(key);
        }
      }
      const span = tasks.get(r.taskId);
      if (!span) return;
      span.setAttribute('stepwise.status', r.status);
      if (r.status === 'failed' || r.status === 'lease-lost') span.setStatus({ code: SpanStatusCode.ERROR, message: r.status });
      span.end();
      tasks.delete(r.taskId);
    },
    onStepStart: (a) => {
      const task = tasks.get(a.taskId);
      const parent = task ? trace.setSpan(context.active(), task) : context.active();
      let step = steps.get(stepKey(a.taskId, a.step));
      if (!step) {
        step = tracer.startSpan(
          `stepwise.step ${a.step}`,
          { attributes: { 'stepwise.task.id': a.taskId, 'stepwise.step': a.step, 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': a.step } },
          parent,
        );
        steps.set(stepKey(a.taskId, a.step), step);
      }
      attempts.set(
        attemptKey(a.taskId, a.step, a.attempt),
        tracer.startSpan(
          `stepwise.attempt ${a.step} #${a.attempt}`,
          {
            attributes: { 'stepwise.task.id': a.taskId, 'stepwise.step': a.step, 'stepwise.attempt': a.attempt, 'stepwise.idempotency_key': a.idempotencyKey },
          },
          trace.setSpan(context.active(), step),
        ),
      );
    },
    onStepEnd: (a) => {
      attempts.get(attemptKey(a.taskId, a.step, a.attempt))?.end();
      attempts.delete(attemptKey(a.taskId, a.step, a.attempt));
      endStep(a.taskId, a.step);
    },
    onStepError: (a) => {
      const span = attempts.get(attemptKey(a.taskId, a.step, a.attempt));
      if (span) {
        span.recordException(a.error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: a.error.message });
        span.end();
        attempts.delete(attemptKey(a.taskId, a.step, a.attempt));
      }
      if (!a.retrying) endStep(a.taskId, a.step, a.error);
    },
  };
}
