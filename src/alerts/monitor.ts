/**
 * @module alerts/monitor
 * A worker's watch for what operators must hear of (`new Engine({ alerts })`): a workflow failing
 * again and again, a task in a crash loop, a workflow no live worker serves, a task stuck past its
 * dwell bound. Each alert goes to the worker's `alert:raised` news (its log, and the observers'
 * `onAlert`) and to the webhook if one is set — at most once per subject and quiet period across every
 * worker of the store: the delivery runs under an idempotency record keyed by the subject and
 * the period (`engine.idempotency`), so a second worker that finds the same thing stays silent.
 * Each delivered alert is also recorded in the store, for `engine.alerts()` and the dashboard.
 */
import type { Clock } from '../clock.ts';
import { coerceError } from '../errors.ts';
import { firstIdAt, newId } from '../ids.ts';
import type { Idempotency } from '../idempotency/run.ts';
import type { Store } from '../store.ts';
import type { DwellAlert } from '../dwell/types.ts';
import { liveVersions } from '../worker/presence.ts';
import type { ResolvedAlerts } from './options.ts';
import type { Alert } from './types.ts';

export interface AlertHost {
  store: Store;
  clock: Clock;
  idempotency: Idempotency | undefined;
  /** The worker's news of a raised alert (its log line). */
  raised: (alert: Alert) => void;
  /** The worker raising alerts, recorded with each. */
  workerId: string;
  onError: (error: Error, during: string) => void;
}

export class AlertMonitor {
  readonly #host: AlertHost;
  readonly #o: ResolvedAlerts;
  /** Subjects this process raised, by quiet period: the fallback without idempotency records. */
  readonly #sent = new Map<string, number>();

  constructor(host: AlertHost, options: ResolvedAlerts) {
    this.#host = host;
    this.#o = options;
  }

  get everyMs(): number {
    return this.#o.everyMs;
  }

  /** One look at the store: failure rates and workflows without workers. Returns the alerts raised. */
  async scan(): Promise<Alert[]> {
    const { store, clock } = this.#host;
    const now = clock.now();
    const names = [...new Set((await store.listWorkflows()).map((w) => w.name))];
    const found: Alert[] = [];
    for (const workflow of names) {
      const rate = this.#o.failureRate;
      if (rate) {
        // The tasks created in the window that have ended (read by the workflow index's id range).
        const counts = await store.countTasks({ statuses: ['succeeded', 'failed'], workflows: [workflow], idAfter: firstIdAt(now - rate.windowMs) });
        const failed = counts.failed ?? 0;
        const ended = failed + (counts.succeeded ?? 0);
        if (ended >= rate.minFinished && failed / ended >= rate.threshold) {
          const share = Math.round((100 * failed) / ended);
          found.push(
            alertOf(
              'failure-rate',
              workflow,
              null,
              now,
              `Workflow "${workflow}": ${failed} of the ${ended} tasks started in the last ${minutes(rate.windowMs)} that ended failed (${share}%).`,
              { failed, ended, windowMs: rate.windowMs },
            ),
          );
        }
      }
      if (this.#o.workersGone) {
        const gone = await this.#workersGone(workflow, now);
        if (gone) found.push(gone);
      }
    }
    const raised: Alert[] = [];
    for (const a of found) if (await this.raise(a)) raised.push(a);
    return raised;
  }

  /**
   * Due tasks of `workflow` that no live worker serves: none serves the workflow at all, or the
   * live ones serve other versions (a task started under a version whose workers are all gone).
   */
  async #workersGone(workflow: string, now: number): Promise<Alert | null> {
    const { store } = this.#host;
    const due = async (notVersions?: string[]): Promise<boolean> => {
      const c = await store.countTasks({ statuses: ['pending', 'waiting'], workflows: [workflow], dueBy: now, ...(notVersions ? { notVersions } : {}) }, 1);
      return (c.pending ?? 0) + (c.waiting ?? 0) > 0;
    };
    if (!(await due())) return null;
    const live = await liveVersions(store, workflow);
    if (!live.length) return alertOf('workers-gone', workflow, null, now, `Workflow "${workflow}" has tasks due and no live worker serves it: start a worker with its code.`, {});
    if (!(await due(live))) return null;
    const message =
      `Workflow "${workflow}" has tasks due under a version no live worker serves (live workers serve ${live.join(', ')}): ` +
      `start a worker with that version's code, or let the new code replay it (compatibleVersions); \`stepwise explain <id>\` names the version.`;
    return alertOf('workers-gone', workflow, null, now, message, { liveVersions: live });
  }

  /** A claim by this worker: a reclaim whose epoch shows the task's workers died `reclaims` times raises a crash loop. */
  async claimed(run: { taskId: string; workflow: string; epoch: number; reclaimed: boolean }): Promise<void> {
    const loop = this.#o.crashLoop;
    if (!loop || !run.reclaimed || run.epoch - 1 < loop.reclaims) return;
    const now = this.#host.clock.now();
    const message = `Task ${run.taskId} (${run.workflow}) was taken over after its worker stopped renewing its lease ${run.epoch - 1} times: a step may crash or hang its worker.`;
    await this.raise({ ...alertOf('crash-loop', run.workflow, run.taskId, now, message, { epoch: run.epoch }), subject: `task:${run.taskId}` });
  }

  /** A dwell bound passed with the `alert` outcome (the dwell scanner). */
  async dwell(d: DwellAlert): Promise<void> {
    if (!this.#o.stuck) return;
    const message = `Task ${d.taskId} (${d.workflow}) stayed ${d.status} past its dwell bound.`;
    await this.raise({ ...alertOf('stuck', d.workflow, d.taskId, this.#host.clock.now(), message, { ...d }), subject: `task:${d.taskId}` });
  }

  /** A model attempt of a task with a budget was counted: a task that has spent `budget.share` of it or more raises a budget alert. */
  async budget(run: { taskId: string; workflow: string }, b: { step: string; spent: { tokens: number; usd: number }; budget: { tokens?: number; usd?: number } }): Promise<void> {
    const near = this.#o.budget;
    if (!near) return;
    const tokens = b.budget.tokens ? b.spent.tokens / b.budget.tokens : 0;
    const usd = b.budget.usd ? b.spent.usd / b.budget.usd : 0;
    const share = Math.max(tokens, usd);
    if (share < near.share) return;
    const what = tokens >= usd ? `${b.spent.tokens} of its ${b.budget.tokens} tokens` : `$${b.spent.usd.toFixed(4)} of its $${b.budget.usd} budget`;
    const message = `Task ${run.taskId} (${run.workflow}) has spent ${what} (${Math.round(100 * share)}%): raise its budget or let it fail when it runs out.`;
    await this.raise({
      ...alertOf('budget', run.workflow, run.taskId, this.#host.clock.now(), message, { step: b.step, spent: b.spent, budget: b.budget, share }),
      subject: `task:${run.taskId}`,
    });
  }

  /** Delivers `alert` unless its subject was alerted in this quiet period (by any worker). Whether it was delivered. */
  async raise(alert: Alert): Promise<boolean> {
    const period = Math.floor(alert.at / this.#o.quietMs);
    const key = `stepwise:alert:${alert.kind}:${alert.subject}:${period}`;
    const idem = this.#host.idempotency;
    let delivered = false;
    const deliver = async (): Promise<boolean> => {
      delivered = true;
      // Listed for operators (`engine.alerts()`, the dashboard), once per key (a worker taking over
      // a delivery cut short by a crash lists it once); an alert that cannot be recorded is still sent.
      await this.#record(alert, key);
      // The worker's news: its log line, and the observers' `onAlert`.
      this.#host.raised(alert);
      await this.#webhook(alert);
      return true;
    };
    if (idem) await idem.run(key, deliver, { ttl: this.#o.quietMs * 2 });
    else if (this.#sent.get(`${alert.kind}:${alert.subject}`) !== period) {
      this.#sent.set(`${alert.kind}:${alert.subject}`, period);
      await deliver();
    }
    return delivered;
  }

  async #record(alert: Alert, dedupe: string): Promise<void> {
    const { store } = this.#host;
    if (typeof store.insertAlert !== 'function') return;
    try {
      const { kind, subject, workflow, taskId, message, at } = alert;
      await store.insertAlert({ id: newId(at), kind, subject, workflow, taskId, message, data: JSON.stringify(alert.data), raisedAt: at, raisedBy: this.#host.workerId, dedupe });
    } catch (e) {
      this.#host.onError(coerceError(e), `recording the ${alert.kind} alert on ${alert.subject}`);
    }
  }

  async #webhook(alert: Alert): Promise<void> {
    const hook = this.#o.webhook;
    if (!hook) return;
    try {
      const res = await fetch(hook.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...hook.headers },
        body: JSON.stringify({ alert }),
        signal: AbortSignal.timeout(hook.timeoutMs),
      });
      if (!res.ok) throw new Error(`the webhook answered ${res.status}`);
    } catch (e) {
      this.#host.onError(coerceError(e), `posting alert ${alert.kind} on ${alert.subject} to ${hook.url}`);
    }
  }
}

function alertOf(kind: Alert['kind'], workflow: string, taskId: string | null, at: number, message: string, data: Record<string, unknown>): Alert {
  return { kind, subject: `workflow:${workflow}`, workflow, taskId, message, at, data };
}

const minutes = (ms: number): string => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`);
