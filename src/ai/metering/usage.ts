/**
 * @module ai/metering/usage
 * Token usage and cost: what one model call used (an {@link AttemptUsage}), its price from a table
 * the user can override, and the per-task summary kept in the task row's `usage` column — totals
 * for the task and per step, the calls in flight (a call a crash cut short is billed on resume),
 * and the budget the task was started with (or raised to by a person). Pure functions over JSON data.
 */
import { askOptions } from '../../approvals/decision-data.ts';
import { resolveOptions } from '../../approvals/policy.ts';
import type { ApprovalOptions } from '../../approvals/types.ts';
import type { AttemptOutcome, AttemptUsage, TokenCounts } from '../../task-events/usage.ts';

export type { AttemptOutcome, AttemptUsage, TokenCounts } from '../../task-events/usage.ts';

/** US dollars per million tokens of a model. `cachedInput` defaults to `input`. */
export interface ModelPrice {
  input: number;
  output: number;
  cachedInput?: number;
}

/** Prices by model id; a key ending in `*` matches ids that start with what precedes it. */
export type PriceTable = Readonly<Record<string, ModelPrice>>;

/**
 * A few common models' list prices (USD per million tokens, as published by their providers at
 * the time of writing). Pass your own table (`prices`) for other models or negotiated prices;
 * a model missing from the table costs 0 and its attempts say `priced: false`.
 */
export const DEFAULT_PRICES: PriceTable = Object.freeze({
  'gpt-4o-mini*': { input: 0.15, output: 0.6, cachedInput: 0.075 },
  'gpt-4o*': { input: 2.5, output: 10, cachedInput: 1.25 },
  'gpt-4.1-mini*': { input: 0.4, output: 1.6, cachedInput: 0.1 },
  'gpt-4.1*': { input: 2, output: 8, cachedInput: 0.5 },
  'o4-mini*': { input: 1.1, output: 4.4, cachedInput: 0.275 },
});

/** Summed usage. */
export interface UsageTotals extends Required<TokenCounts> {
  /** input + output. */
  totalTokens: number;
  costUsd: number;
  /** Attempts counted (failed, cancelled and interrupted ones included). */
  attempts: number;
}

/**
 * A task's budget: the call that would take it over either limit is refused. `onExceeded` says
 * what a refused call does: fail the task with BUDGET_EXCEEDED (the default), or park the task on
 * an approval `budget:<step>` (payload `{ step, limit, budget, spent, projected }`) that a person
 * approves with the new limits as data (`{ tokens?, usd? }`: the task's budget is raised durably
 * and the call is made) or rejects (the task fails with BUDGET_EXCEEDED).
 */
export interface Budget {
  tokens?: number;
  usd?: number;
  /**
   * `'task'` (the default): the task's own calls. `'subtree'`: the calls of the task and of every
   * task below it (its children, theirs, …) count together; a call of any of them that would pass
   * it is not made, and that task fails with BUDGET_EXCEEDED. A subtree budget cannot ask.
   */
  scope?: 'task' | 'subtree';
  onExceeded?: 'fail' | { ask: Pick<ApprovalOptions, 'approvers' | 'timeout' | 'onTimeout' | 'remindEvery' | 'quorum'> };
}

/** A call in flight, kept so that a crash during it is still billed. */
export interface OpenCall {
  attempt: number;
  model: string;
  startedAt: number;
}

/**
 * The task row's `usage` column: totals only, so that the row stays the same size however many
 * calls the task makes (per-attempt usage is in the log, `usage:attempt`, and per-step totals are
 * added up from it when a task is read).
 */
export interface UsageSummary {
  total: UsageTotals;
  /** Attempts made so far of steps whose last attempt did not succeed (numbers the next one). */
  retrying: Record<string, number>;
  open: Record<string, OpenCall>;
  /** A budget given at `start()` (it wins over the workflow's). */
  budget?: Budget;
  /** The subtree budgets of the tasks above this one (a child's, set when it is started). */
  above?: SubtreeLimit[];
}

/** The subtree budget of a task above: its id and limits. */
export interface SubtreeLimit {
  taskId: string;
  tokens?: number;
  usd?: number;
}

export const emptyTotals = (): UsageTotals => ({
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  reasoningTokens: 0,
  totalTokens: 0,
  costUsd: 0,
  attempts: 0,
});

export const emptySummary = (): UsageSummary => ({ total: emptyTotals(), retrying: {}, open: {} });

/** The column as stored; a summary written before per-step totals left the row (`steps`) keeps its attempt counts. */
export function parseSummary(text: string | null): UsageSummary {
  if (!text) return emptySummary();
  const s = JSON.parse(text) as Partial<UsageSummary> & { steps?: Record<string, UsageTotals> };
  const retrying = s.retrying ?? Object.fromEntries(Object.entries(s.steps ?? {}).map(([step, t]) => [step, t.attempts]));
  return { total: s.total ?? emptyTotals(), retrying, open: s.open ?? {}, ...(s.budget ? { budget: s.budget } : {}), ...(s.above?.length ? { above: s.above } : {}) };
}

/** Per-step totals of a task's attempts (its `usage:attempt` log entries). */
export function stepTotals(attempts: Iterable<AttemptUsage>): Record<string, UsageTotals> {
  const out: Record<string, UsageTotals> = {};
  for (const u of attempts) out[u.step] = add(out[u.step] ?? emptyTotals(), u);
  return out;
}

/** The price of `model` in `prices` (exact id first, then the longest matching `prefix*`). */
export function priceOf(model: string, prices: PriceTable): ModelPrice | undefined {
  const exact = prices[model];
  if (exact) return exact;
  let best: { len: number; price: ModelPrice } | undefined;
  for (const [key, price] of Object.entries(prices)) {
    if (!key.endsWith('*')) continue;
    const prefix = key.slice(0, -1);
    if (model.startsWith(prefix) && (!best || prefix.length > best.len)) best = { len: prefix.length, price };
  }
  return best?.price;
}

const count = (n: number | undefined): number => (typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : 0);

/** Cached input is billed at its own rate; the rest of the input and the output at theirs. */
export function costOf(model: string, tokens: TokenCounts, prices: PriceTable): { costUsd: number; priced: boolean } {
  const price = priceOf(model, prices);
  if (!price) return { costUsd: 0, priced: false };
  const cached = Math.min(count(tokens.cachedInputTokens), count(tokens.inputTokens));
  const usd = ((count(tokens.inputTokens) - cached) * price.input + cached * (price.cachedInput ?? price.input) + count(tokens.outputTokens) * price.output) / 1_000_000;
  return { costUsd: usd, priced: true };
}

/** The record of one attempt, priced. */
export function attemptUsage(
  a: { step: string; attempt: number; model: string; outcome: AttemptOutcome; estimated?: boolean; error?: string },
  tokens: TokenCounts,
  prices: PriceTable,
): AttemptUsage {
  const { costUsd, priced } = costOf(a.model, tokens, prices);
  return {
    step: a.step,
    attempt: a.attempt,
    model: a.model,
    outcome: a.outcome,
    inputTokens: count(tokens.inputTokens),
    outputTokens: count(tokens.outputTokens),
    cachedInputTokens: count(tokens.cachedInputTokens),
    reasoningTokens: count(tokens.reasoningTokens),
    costUsd,
    priced,
    estimated: a.estimated ?? false,
    ...(a.error ? { error: a.error } : {}),
  };
}

function add(t: UsageTotals, u: AttemptUsage): UsageTotals {
  return {
    inputTokens: t.inputTokens + u.inputTokens,
    outputTokens: t.outputTokens + u.outputTokens,
    cachedInputTokens: t.cachedInputTokens + u.cachedInputTokens,
    reasoningTokens: t.reasoningTokens + u.reasoningTokens,
    totalTokens: t.totalTokens + u.inputTokens + u.outputTokens,
    costUsd: t.costUsd + u.costUsd,
    attempts: t.attempts + 1,
  };
}

/** The summary with an attempt counted (and its call no longer in flight). */
export function withAttempt(s: UsageSummary, u: AttemptUsage): UsageSummary {
  const open = { ...s.open };
  if (open[u.step]?.attempt === u.attempt) delete open[u.step];
  const retrying = { ...s.retrying };
  // A step that succeeded is not called again; one that did not may be, as its next attempt.
  if (u.outcome === 'succeeded') delete retrying[u.step];
  else retrying[u.step] = Math.max(retrying[u.step] ?? 0, u.attempt);
  return { ...s, total: add(s.total, u), retrying, open };
}

/** The summary with a call of `step` in flight. */
export function withOpen(s: UsageSummary, step: string, call: OpenCall): UsageSummary {
  return { ...s, open: { ...s.open, [step]: call } };
}

/** Rough tokens of a text the provider never counted for us (a cut-off stream): ~4 characters a token. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** The limit a call would break, if any: spent so far plus what the call may take. */
export function overBudget(budget: Budget | undefined, spent: UsageTotals, next: { tokens: number; usd: number }): { limit: 'tokens' | 'usd'; budget: number; projected: number } | null {
  if (!budget) return null;
  if (budget.tokens !== undefined) {
    const projected = spent.totalTokens + next.tokens;
    if (spent.totalTokens >= budget.tokens || projected > budget.tokens) return { limit: 'tokens', budget: budget.tokens, projected };
  }
  if (budget.usd !== undefined) {
    const projected = spent.costUsd + next.usd;
    if (spent.costUsd >= budget.usd || projected > budget.usd) return { limit: 'usd', budget: budget.usd, projected };
  }
  return null;
}

/** Checks a budget's shape (`where` names it in the message); returns it. */
export function checkBudget(budget: unknown, where: string): Budget {
  if (typeof budget !== 'object' || budget === null) throw new TypeError(`${where}: budget must be an object { tokens?, usd? }.`);
  const b = budget as Record<string, unknown>;
  for (const key of Object.keys(b)) {
    if (key === 'onExceeded') {
      checkOnExceeded(b.onExceeded, where);
      continue;
    }
    if (key === 'scope') {
      if (b.scope !== undefined && b.scope !== 'task' && b.scope !== 'subtree') throw new TypeError(`${where}: budget.scope must be 'task' or 'subtree', got ${JSON.stringify(b.scope)}.`);
      continue;
    }
    if (key !== 'tokens' && key !== 'usd') throw new TypeError(`${where}: unknown budget key "${key}" (known: tokens, usd, scope, onExceeded).`);
    const v = b[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) throw new TypeError(`${where}: budget.${key} must be a number ≥ 0, got ${String(v)}.`);
  }
  if (b.scope === 'subtree' && b.onExceeded !== undefined && b.onExceeded !== 'fail') {
    throw new TypeError(`${where}: a subtree budget cannot ask (budget.onExceeded must be 'fail'): the call that would pass it may be any task's of the tree.`);
  }
  return b as Budget;
}

function checkOnExceeded(v: unknown, where: string): void {
  if (v === undefined || v === 'fail') return;
  const ask = typeof v === 'object' && v !== null && Object.keys(v).length === 1 ? (v as { ask?: unknown }).ask : undefined;
  if (ask === undefined) throw new TypeError(`${where}: budget.onExceeded must be 'fail' or { ask: { approvers, timeout, onTimeout } }, got ${JSON.stringify(v)}.`);
  try {
    resolveOptions('budget', askOptions(ask));
  } catch (e) {
    throw new TypeError(`${where}: budget.onExceeded.ask: ${(e as Error).message}`);
  }
}
