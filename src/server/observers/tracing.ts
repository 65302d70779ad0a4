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
import { InvalidArgumentError, type AttemptInfo, type Observer, type RunInfo } from '../../index.ts';

export interface TracingOptions {
  /** @defaultValue the global provider's tracer named "stepwise" */
  tracer?: Tracer;
}

/**
 * Loads `@opentelemetry/api` (an optional peer dependency: importing the server never needs it)
 * and returns the observer.
 */
export async function createTracingObserver(options: TracingOptions = {}): Promise<Observer> {
  let api: OtelApi;
  try {
    api = await import('@opentelemetry/api');
  } catch (e) {
    throw new InvalidArgumentError('createTracingObserver() needs the optional peer dependency @opentelemetry/api: npm install @opentelemetry/api.', { cause: e });
  }
  const spans = new RunSpans(api, options.tracer ?? api.trace.getTracer('stepwise'));
  return {
    name: 'opentelemetry',
    onRunStart: (r) => spans.startRun(r),
    onRunEnd: (r) => spans.endRun(r),
    onStepStart: (a) => spans.startAttempt(a),
    onStepEnd: (a) => spans.endAttempt(a),
    onStepError: (a) => spans.endAttempt(a, a.error, !a.retrying),
  };
}

type OtelApi = typeof import('@opentelemetry/api');
type RunEnd = Parameters<NonNullable<Observer['onRunEnd']>>[0];

const stepKey = (taskId: string, step: string): string => `${taskId}\u0000${step}`;
const attemptKey = (taskId: string, step: string, n: number): string => `${taskId}\u0000${step}\u0000${n}`;

/** The open spans of the runs of this process: per task, per step of a run, per attempt. */
class RunSpans {
  readonly #api: OtelApi;
  readonly #tracer: Tracer;
  readonly #tasks = new Map<string, Span>();
  readonly #steps = new Map<string, Span>();
  readonly #attempts = new Map<string, Span>();

  constructor(api: OtelApi, tracer: Tracer) {
    this.#api = api;
    this.#tracer = tracer;
  }

  startRun(r: RunInfo): void {
    const attributes = {
      'stepwise.task.id': r.taskId,
      'stepwise.workflow': r.workflow,
      'stepwise.epoch': r.epoch,
      'stepwise.worker.id': r.workerId,
      'stepwise.reclaimed': r.reclaimed,
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': r.workflow,
    };
    this.#tasks.set(r.taskId, this.#tracer.startSpan(`stepwise.task ${r.workflow}`, { attributes }));
  }

  /** Ends the run's span and any step or attempt span it left open. */
  endRun(r: RunEnd): void {
    for (const [key, span] of [...this.#attempts, ...this.#steps]) {
      if (key.startsWith(`${r.taskId}\u0000`)) {
        span.end();
        this.#attempts.delete(key);
        this.#steps.delete(key);
      }
    }
    const span = this.#tasks.get(r.taskId);
    if (!span) return;
    span.setAttribute('stepwise.status', r.status);
    if (r.status === 'failed' || r.status === 'lease-lost') span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: r.status });
    span.end();
    this.#tasks.delete(r.taskId);
  }

  /** Opens the attempt's span, under its step's span (opened by the step's first attempt in this run). */
  startAttempt(a: AttemptInfo): void {
    const { context, trace } = this.#api;
    const task = this.#tasks.get(a.taskId);
    let step = this.#steps.get(stepKey(a.taskId, a.step));
    if (!step) {
      const attributes = { 'stepwise.task.id': a.taskId, 'stepwise.step': a.step, 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': a.step };
      step = this.#tracer.startSpan(`stepwise.step ${a.step}`, { attributes }, task ? trace.setSpan(context.active(), task) : context.active());
      this.#steps.set(stepKey(a.taskId, a.step), step);
    }
    const attributes = { 'stepwise.task.id': a.taskId, 'stepwise.step': a.step, 'stepwise.attempt': a.attempt, 'stepwise.idempotency_key': a.idempotencyKey };
    this.#attempts.set(attemptKey(a.taskId, a.step, a.attempt), this.#tracer.startSpan(`stepwise.attempt ${a.step} #${a.attempt}`, { attributes }, trace.setSpan(context.active(), step)));
  }

  /** Ends the attempt's span (with its error), and its step's span when no attempt follows. */
  endAttempt(a: AttemptInfo, error?: Error, last = true): void {
    const key = attemptKey(a.taskId, a.step, a.attempt);
    const span = this.#attempts.get(key);
    if (span) {
      if (error) {
        span.recordException(error);
        span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: error.message });
      }
      span.end();
      this.#attempts.delete(key);
    }
    if (last) this.#endStep(a.taskId, a.step, error);
  }

  #endStep(taskId: string, step: string, error?: Error): void {
    const span = this.#steps.get(stepKey(taskId, step));
    if (!span) return;
    if (error) span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: error.message });
    span.end();
    this.#steps.delete(stepKey(taskId, step));
  }
}
