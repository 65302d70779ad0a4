/**
 * @module ai/metering/meter
 * Internal: not part of the public API.
 * The usage meter of one run: before a model call it settles a call a crash left open (billed as
 * `interrupted`), checks the task's budget (a call over it fails the task, or parks it on a
 * person's decision to raise the budget: `budget-ask.ts`) and records the call as in flight; after it, records
 * the attempt (succeeded, failed or cancelled) as a `usage:attempt` entry of the task's log. Each
 * write also stores the task's usage summary (the row's `usage` column), fenced by the run's
 * epoch, so spending survives a crash and a resumed task does not get its budget back. Writes are
 * made one after the other, in the order of the calls.
 */
import { BudgetExceededError, InvalidArgumentError, LeaseLostError } from '../../errors.ts';
import { EVENT_TYPES } from '../../log-entries.ts';
import { budgetPark } from './budget-ask.ts';
import type { RunCore } from '../../run/core.ts';
import type { NewEvent } from '../../store.ts';
import type { StepContext, UsageReport } from '../../workflow.ts';
import {
  DEFAULT_PRICES,
  attemptUsage,
  costOf,
  estimateTokens,
  overBudget,
  parseSummary,
  withAttempt,
  withOpen,
  type AttemptOutcome,
  type AttemptUsage,
  type Budget,
  type PriceTable,
  type TokenCounts,
  type UsageSummary,
  type UsageTotals,
} from './usage.ts';
import { subtreeSpent } from './subtree-budget.ts';

const USAGE_EVENT = EVENT_TYPES.usageAttempt;

export class UsageMeter {
  readonly #run: RunCore;
  #summary: UsageSummary;
  #writes: Promise<unknown> = Promise.resolve();
  /** Steps with a call left open by an earlier run (its process died during the call). */
  readonly #inherited: Set<string>;
  /** The last attempt number given out per step in this run (an attempt may still be ending). */
  readonly #given = new Map<string, number>();

  constructor(run: RunCore) {
    this.#run = run;
    this.#summary = parseSummary(run.task.usage);
    this.#inherited = new Set(Object.keys(this.#summary.open));
  }

  get summary(): UsageSummary {
    return this.#summary;
  }

  /** The start budget wins over the workflow's. */
  get budget(): Budget | undefined {
    return this.#summary.budget ?? this.#run.workflow.options.budget;
  }

  prices(extra?: PriceTable): PriceTable {
    return { ...DEFAULT_PRICES, ...this.#run.workflow.options.prices, ...extra };
  }

  /**
   * Before a call of `step` to `model`: bills a call of that step a crash cut short, refuses a call
   * over budget (the run fails with BudgetExceededError), and records this one as in flight.
   * Returns the attempt's number (every attempt that reached the provider counts).
   */
  async begin(step: string, model: string, options: { maxOutputTokens?: number; prices?: PriceTable } = {}): Promise<number> {
    const run = this.#run;
    const prices = this.prices(options.prices);
    const events: AttemptUsage[] = [];
    const open = this.#inherited.delete(step) ? this.#summary.open[step] : undefined;
    if (open) {
      // What it streamed before the crash is still in the chunk table: its output, estimated.
      const streamed = await this.#streamedBy(step, open.attempt);
      const lost = attemptUsage({ step, attempt: open.attempt, model: open.model, outcome: 'interrupted', estimated: true }, { outputTokens: estimateTokens(streamed) }, prices);
      this.#summary = withAttempt(this.#summary, lost);
      events.push(lost);
    }
    const next = options.maxOutputTokens ?? 0;
    const nextCall = { tokens: next, usd: costOf(model, { outputTokens: next }, prices).costUsd };
    const budget = this.budget;
    const over = overBudget(budget, budget?.scope === 'subtree' ? await this.#subtreeSpent(run.taskId) : this.#summary.total, nextCall);
    if (over) {
      if (events.length) await this.#write(events);
      const onExceeded = budget?.onExceeded;
      if (onExceeded !== undefined && onExceeded !== 'fail') throw budgetPark(this, step, over, onExceeded.ask);
      throw run.fail(new BudgetExceededError(run.taskId, step, over.limit, over.budget, over.projected, '', budget?.scope === 'subtree' ? run.taskId : undefined));
    }
    // The subtree budgets of the tasks above: each against what its whole subtree has spent.
    for (const limit of this.#summary.above ?? []) {
      const overAbove = overBudget(limit, await this.#subtreeSpent(limit.taskId), nextCall);
      if (!overAbove) continue;
      if (events.length) await this.#write(events);
      throw run.fail(new BudgetExceededError(run.taskId, step, overAbove.limit, overAbove.budget, overAbove.projected, '', limit.taskId));
    }
    const attempt = Math.max(this.#summary.retrying[step] ?? 0, this.#given.get(step) ?? 0) + 1;
    this.#given.set(step, attempt);
    this.#summary = withOpen(this.#summary, step, { attempt, model, startedAt: run.deps.clock.now() });
    await this.#write(events);
    return attempt;
  }

  /** Raises the task's budget to `limits` (a person's decision), durably: a resumed task keeps it. */
  async raise(limits: { tokens?: number; usd?: number }): Promise<void> {
    this.#summary = { ...this.#summary, budget: { ...this.budget, ...limits } };
    await this.#write([]);
  }

  /** After a call: the attempt's usage, priced and recorded. */
  async end(
    step: string,
    attempt: number,
    model: string,
    outcome: AttemptOutcome,
    tokens: TokenCounts,
    more: { estimated?: boolean; error?: string; prices?: PriceTable } = {},
  ): Promise<AttemptUsage> {
    const u = attemptUsage({ step, attempt, model, outcome, estimated: more.estimated ?? false, ...(more.error ? { error: more.error } : {}) }, tokens, this.prices(more.prices));
    this.#summary = withAttempt(this.#summary, u);
    await this.#write([u]);
    const budget = this.budget;
    if (budget && (budget.tokens !== undefined || budget.usd !== undefined)) {
      const spent = { tokens: this.#summary.total.totalTokens, usd: this.#summary.total.costUsd };
      const limits = { ...(budget.tokens !== undefined ? { tokens: budget.tokens } : {}), ...(budget.usd !== undefined ? { usd: budget.usd } : {}) };
      this.#run.deps.emit('budget:spent', { taskId: this.#run.taskId, step, spent, budget: limits });
    }
    return u;
  }

  /** What the subtree of `taskId` (this task or one above it) has spent, this task's calls as this meter knows them. */
  #subtreeSpent(taskId: string): Promise<UsageTotals> {
    const run = this.#run;
    return subtreeSpent(run.deps.store, run.task.rootId ?? run.taskId, taskId, { id: run.taskId, total: this.#summary.total });
  }

  /** The text attempt `attempt` of `step` streamed (what the chunk table kept of it). */
  async #streamedBy(step: string, attempt: number): Promise<string> {
    const run = this.#run;
    let text = '';
    for (let after = 0; ;) {
      const rows = await run.deps.store.getChunks(run.taskId, after, 1000);
      for (const r of rows) if (r.step === step && r.attempt === attempt && r.kind === 'delta') text += r.delta;
      if (rows.length < 1000) return text;
      after = (rows[rows.length - 1] as { id: number }).id;
    }
  }

  #write(usages: readonly AttemptUsage[]): Promise<void> {
    const run = this.#run;
    const events: NewEvent[] = usages.map((u) => ({ type: USAGE_EVENT, actorKind: 'worker', actorId: run.deps.workerId, data: JSON.stringify(u) }));
    const usage = JSON.stringify(this.#summary);
    const write = this.#writes.then(async () => {
      const ok = await run.deps.store.appendRunEvents({ taskId: run.taskId, epoch: run.epoch, at: run.deps.clock.now(), events, usage });
      if (!ok) throw new LeaseLostError(run.taskId, run.epoch);
    });
    this.#writes = write.catch(() => undefined);
    return write;
  }
}

const meters = new WeakMap<RunCore, UsageMeter>();

/** The meter of a run (one per run). */
export function meterOf(run: RunCore): UsageMeter {
  let m = meters.get(run);
  if (!m) {
    m = new UsageMeter(run);
    meters.set(run, m);
  }
  return m;
}

/** `ctx.usage(step, report)`: an attempt of a plain step that called a model another way. */
export async function reportUsage(run: RunCore, step: StepContext, report: UsageReport): Promise<void> {
  if (typeof step !== 'object' || step === null || typeof step.stepName !== 'string') {
    throw new InvalidArgumentError('ctx.usage(step, report): pass the step context the step function received as the first argument.');
  }
  if (typeof report !== 'object' || report === null || typeof report.model !== 'string' || !report.model) {
    throw new InvalidArgumentError('ctx.usage(step, report): report needs a model id ({ model, inputTokens, outputTokens, … }).');
  }
  for (const k of ['inputTokens', 'outputTokens', 'cachedInputTokens', 'reasoningTokens'] as const) {
    const v = report[k];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) throw new InvalidArgumentError(`ctx.usage(): ${k} must be a number ≥ 0, got ${String(v)}.`);
  }
  const meter = meterOf(run);
  // The step's own attempt number (it counts across resumes).
  const attempt = typeof step.attempt === 'number' ? step.attempt : (meter.summary.retrying[step.stepName] ?? 0) + 1;
  await meter.end(step.stepName, attempt, report.model, report.outcome ?? 'succeeded', report);
}
