/**
 * @module server/observers/metrics
 * Prometheus metrics (prom-client) for operators. The engine side is an {@link Observer}: step
 * durations, retries, lease losses, runs and wake latency come from its hooks and log entries;
 * model tokens, cost and calls from the usage entries (`usage:attempt`) of the log, approval
 * decisions from its `approval:decision` entries, dwell alerts from `onDwellAlert`.
 * Tasks by status and the queue depth are counted in the store when scraped (so they count every
 * process's tasks, not only this one's), each status up to 100,000 (a scrape's work stays bounded). HTTP requests and idempotency replays come from the server.
 *
 * Wake latency is how long a task that became runnable (created, resumed, retried, woken) waited
 * before a worker claimed it, measured on the log entries' own times.
 * @example
 * const metrics = new ServerMetrics();
 * const engine = new Engine({ observers: [metrics.observer] });
 * createServer(engine, { tokens, metrics });
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Engine, Observer } from '../../index.ts';

/** How many tasks of one status are counted at most per scrape (the work of a scrape stays bounded). */
const COUNT_CAP = 100_000;

export class ServerMetrics {
  readonly registry: Registry;
  readonly observer: Observer;
  readonly #requests: Counter<'method' | 'status'>;
  readonly #idempotencyHits: Counter;
  #engine: Engine | null = null;

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    const r = [registry];
    this.#requests = new Counter({ name: 'stepwise_http_requests_total', help: 'HTTP requests by method and status', labelNames: ['method', 'status'], registers: r });
    this.#idempotencyHits = new Counter({ name: 'stepwise_idempotency_hits_total', help: 'POSTs answered with the first answer of their Idempotency-Key', registers: r });
    storeGauges(r, () => this.#engine);
    this.observer = engineObserver(engineCounters(r));
  }

  /** Reads task counts from this engine's store at scrape time. */
  watchEngine(engine: Engine): void {
    this.#engine = engine;
  }

  request(method: string, status: number): void {
    this.#requests.inc({ method: method.length <= 10 ? method : 'OTHER', status: String(status) });
  }

  idempotencyHit(): void {
    this.#idempotencyHits.inc();
  }
}

type Counters = ReturnType<typeof engineCounters>;

/** The metrics counted from the engine's hooks and log entries. */
function engineCounters(r: Registry[]) {
  return {
    stepSeconds: new Histogram({
      name: 'stepwise_step_duration_seconds',
      help: 'Duration of step attempts, by workflow, step and outcome',
      labelNames: ['workflow', 'step', 'outcome'],
      buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800],
      registers: r,
    }),
    retries: new Counter({ name: 'stepwise_step_retries_total', help: 'Step attempts that failed and will be retried', labelNames: ['workflow', 'step'], registers: r }),
    stepFailures: new Counter({ name: 'stepwise_step_failures_total', help: 'Steps that failed for good', labelNames: ['workflow', 'step'], registers: r }),
    runs: new Counter({ name: 'stepwise_runs_total', help: 'Runs of tasks by how they ended', labelNames: ['workflow', 'status'], registers: r }),
    leaseLosses: new Counter({ name: 'stepwise_lease_losses_total', help: 'Runs that lost their lease to another worker', labelNames: ['workflow'], registers: r }),
    wakeLatency: new Histogram({
      name: 'stepwise_wake_latency_seconds',
      help: 'Time from a task becoming runnable to its claim',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120],
      registers: r,
    }),
    modelTokens: new Counter({
      name: 'stepwise_model_tokens_total',
      help: 'Model tokens used by step attempts (from usage log entries), by workflow, model and kind',
      labelNames: ['workflow', 'model', 'kind'],
      registers: r,
    }),
    modelCost: new Counter({
      name: 'stepwise_model_cost_usd_total',
      help: 'Model cost in US dollars of step attempts (from usage log entries), by workflow and model',
      labelNames: ['workflow', 'model'],
      registers: r,
    }),
    modelCalls: new Counter({ name: 'stepwise_model_calls_total', help: 'Model call attempts by workflow, model and outcome', labelNames: ['workflow', 'model', 'outcome'], registers: r }),
    decisions: new Counter({ name: 'stepwise_approval_decisions_total', help: 'Approval decisions recorded, by whether they approve', labelNames: ['approve'], registers: r }),
    deleted: new Counter({
      name: 'stepwise_tasks_deleted_total',
      help: 'Finished tasks deleted by this process, by workflow, final status and why (delete, purge, retention)',
      labelNames: ['workflow', 'status', 'reason'],
      registers: r,
    }),
    transitions: new Counter({ name: 'stepwise_transitions_total', help: 'Lifecycle transitions written by this process', labelNames: ['event', 'to'], registers: r }),
    dwellAlerts: new Counter({
      name: 'stepwise_dwell_alerts_total',
      help: 'Tasks that stayed past a dwell bound whose outcome is alert, by workflow and status',
      labelNames: ['workflow', 'status'],
      registers: r,
    }),
    alerts: new Counter({ name: 'stepwise_alerts_total', help: "Alerts raised by this process's workers (new Engine({ alerts })), by kind", labelNames: ['kind'], registers: r }),
  };
}

/** Tasks by status and the queue depth, read from the store when scraped. */
function storeGauges(r: Registry[], engineOf: () => Engine | null): void {
  new Gauge({
    name: 'stepwise_tasks',
    help: 'Tasks by status (read from the store at scrape time)',
    labelNames: ['status'],
    registers: r,
    async collect() {
      const engine = engineOf();
      if (!engine) return;
      for (const [status, n] of Object.entries(await engine.count({ cap: COUNT_CAP }))) this.set({ status }, n);
    },
  });
  new Gauge({
    name: 'stepwise_queue_depth',
    help: 'Pending tasks that are due now (waiting for a worker)',
    registers: r,
    async collect() {
      const engine = engineOf();
      if (!engine) return;
      this.set((await engine.count({ status: 'pending', due: true, cap: COUNT_CAP })).pending);
    },
  });
}

function engineObserver(c: Counters): Observer {
  /** The workflow of each task this process ran, for the usage metrics' label (log entries carry no workflow). */
  const workflowOf = new Map<string, string>();
  const onEvent = eventCounter(c, workflowOf);
  return {
    name: 'prometheus',
    onRunStart: (run) => {
      workflowOf.delete(run.taskId);
      workflowOf.set(run.taskId, run.workflow);
      if (workflowOf.size > 100_000) workflowOf.delete(workflowOf.keys().next().value as string);
    },
    onStepEnd: (a) => c.stepSeconds.observe({ workflow: a.workflow, step: baseName(a.step), outcome: 'completed' }, a.durationMs / 1000),
    onStepError: (a) => (a.retrying ? c.retries : c.stepFailures).inc({ workflow: a.workflow, step: baseName(a.step) }),
    onRunEnd: (run) => {
      c.runs.inc({ workflow: run.workflow, status: run.status });
      if (run.status === 'lease-lost') c.leaseLosses.inc({ workflow: run.workflow });
    },
    onTasksDeleted: (e) => {
      for (const t of e.tasks) c.deleted.inc({ workflow: t.workflow, status: t.status, reason: e.reason });
    },
    onDwellAlert: (a) => c.dwellAlerts.inc({ workflow: a.workflow, status: a.status }),
    onAlert: (a) => c.alerts.inc({ kind: a.kind }),
    onEvent,
  };
}

/** Counts log entries: model usage, approval decisions, transitions and wake latency. */
function eventCounter(c: Counters, workflowOf: ReadonlyMap<string, string>): NonNullable<Observer['onEvent']> {
  /** When each task last became runnable (pending), for wake latency. */
  const runnableAt = new Map<string, number>();
  return (e) => {
    if (e.type === 'usage:attempt') {
      const u = e.usage;
      const workflow = workflowOf.get(e.taskId) ?? 'unknown';
      const model = u.model.length <= 100 ? u.model : 'other';
      c.modelTokens.inc({ workflow, model, kind: 'input' }, u.inputTokens);
      c.modelTokens.inc({ workflow, model, kind: 'output' }, u.outputTokens);
      if (u.cachedInputTokens) c.modelTokens.inc({ workflow, model, kind: 'cached_input' }, u.cachedInputTokens);
      if (u.reasoningTokens) c.modelTokens.inc({ workflow, model, kind: 'reasoning' }, u.reasoningTokens);
      c.modelCost.inc({ workflow, model }, u.costUsd);
      c.modelCalls.inc({ workflow, model, outcome: u.outcome });
      return;
    }
    if (e.type === 'approval:decision') {
      c.decisions.inc({ approve: String(e.detail.approve === true) });
      return;
    }
    if (e.type !== 'transition') return;
    c.transitions.inc({ event: e.event, to: e.to });
    if (e.to === 'pending') runnableAt.set(e.taskId, e.at);
    else if ((e.event === 'claim' || e.event === 'reclaim') && runnableAt.has(e.taskId)) {
      c.wakeLatency.observe(Math.max(0, e.at - (runnableAt.get(e.taskId) as number)) / 1000);
      runnableAt.delete(e.taskId);
    } else runnableAt.delete(e.taskId);
    if (runnableAt.size > 100_000) runnableAt.delete(runnableAt.keys().next().value as string);
  };
}

function baseName(step: string): string {
  return step.replace(/#\d+$/, '');
}
