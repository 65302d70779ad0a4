/**
 * @module approvals/decision-data
 * Internal: not part of the public API (the package exports only its index modules).
 * The decision data of the approvals the engine itself asks for, when a step parks on a person's
 * decision at its own journal position. Their call keys start with `ask:<purpose>:` (a workflow's
 * `ctx.approval` keys start with its journal name, `approval:`), and each purpose defines what an
 * approving decision's `data` says:
 * - `ask:exhausted:` (a step with `onExhausted: 'ask'` ran out of attempts):
 *   `{ action: 'supply', output }` (the step's output), `{ action: 'retry' }` (a fresh set of
 *   attempts), `{ action: 'skip' }` (its declared `fallback`; only when it declares one),
 *   `{ action: 'fail' }`. A rejection fails the step.
 * - `ask:effect:` (an at-most-once step whose effect nobody could verify):
 *   `{ action: 'rerun' }`, `{ action: 'skip', result? }` (`result` is the step's result),
 *   `{ action: 'fail' }`. A rejection fails the step.
 * - `ask:budget:` (a model call over the task's budget): `{ tokens?, usd? }`, the task's new
 *   limits; the one that was exceeded must be raised above what the call needs. A rejection fails
 *   the task with BUDGET_EXCEEDED.
 * {@link checkDecisionData} refuses bad data at `engine.decide()` time (INVALID_ARGUMENT); the
 * parse functions are also what the waiting step applies, so data that reaches it another way
 * (a timeout policy that approves) becomes a recorded failure of the step, never a guess.
 */
import { InvalidArgumentError } from '../errors.ts';
import type { ApprovalRow } from '../store.ts';
import type { ApprovalOptions } from './types.ts';

export const ASK_PREFIX = { exhausted: 'ask:exhausted:', effect: 'ask:effect:', budget: 'ask:budget:' } as const;

export type ExhaustedAction = { action: 'supply'; output: unknown } | { action: 'retry' } | { action: 'skip' } | { action: 'fail' };
export type EffectAction = { action: 'rerun' } | { action: 'skip'; result: unknown } | { action: 'fail' };
export interface BudgetRaise {
  tokens?: number;
  usd?: number;
}

/** What the payload of a budget approval carries (see `ai/budget-ask.ts`). */
export interface BudgetPayload {
  step: string;
  limit: 'tokens' | 'usd';
  budget: BudgetRaise;
  spent: { tokens: number; usd: number };
  /** What the spending would reach with the refused call (in the exceeded limit's unit). */
  projected: number;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; problem: string };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The action of an approved decision on an exhausted step; `canSkip`: the step declares a fallback. */
export function parseExhausted(data: unknown, canSkip: boolean): Parsed<ExhaustedAction> {
  const shape = "{ action: 'supply', output } | { action: 'retry' } | { action: 'skip' } | { action: 'fail' }";
  if (!isObj(data)) return { ok: false, problem: `an approving decision needs data ${shape}` };
  switch (data.action) {
    case 'supply':
      if (!('output' in data)) return { ok: false, problem: "{ action: 'supply' } needs the step's output: { action: 'supply', output }" };
      return { ok: true, value: { action: 'supply', output: data.output } };
    case 'skip':
      if (!canSkip) return { ok: false, problem: "the step declares no fallback, so it cannot be skipped: supply its output ({ action: 'supply', output }) instead" };
      return { ok: true, value: { action: 'skip' } };
    case 'retry':
    case 'fail':
      return { ok: true, value: { action: data.action } };
    default:
      return { ok: false, problem: `unknown action ${JSON.stringify(data.action)}: the data is ${shape}` };
  }
}

export function parseEffect(data: unknown): Parsed<EffectAction> {
  const shape = "{ action: 'rerun' } | { action: 'skip', result } | { action: 'fail' }";
  if (!isObj(data)) return { ok: false, problem: `an approving decision needs data ${shape}` };
  if (data.action === 'skip') return { ok: true, value: { action: 'skip', result: data.result ?? null } };
  if (data.action === 'rerun' || data.action === 'fail') return { ok: true, value: { action: data.action } };
  return { ok: false, problem: `unknown action ${JSON.stringify(data.action)}: the data is ${shape}` };
}

export function parseBudget(data: unknown, p: BudgetPayload): Parsed<BudgetRaise> {
  if (!isObj(data)) return { ok: false, problem: `an approving decision needs the new budget as data: { tokens?, usd? } (the ${p.limit} limit raised above ${p.projected})` };
  const out: BudgetRaise = {};
  for (const [k, v] of Object.entries(data)) {
    if (k !== 'tokens' && k !== 'usd') return { ok: false, problem: `unknown budget key "${k}" (known: tokens, usd)` };
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) return { ok: false, problem: `budget.${k} must be a number ≥ 0, got ${JSON.stringify(v)}` };
    out[k] = v;
  }
  const raised = out[p.limit];
  if (raised === undefined || raised < p.projected) {
    return { ok: false, problem: `the ${p.limit} limit (now ${String(p.budget[p.limit])}) must be raised to at least ${p.projected}, what the call needs; got ${JSON.stringify(data)}` };
  }
  return { ok: true, value: out };
}

/** Refuses an approving decision whose data the waiting step could not apply. */
export function checkDecisionData(row: ApprovalRow, approve: boolean, data: unknown): void {
  if (!approve || !row.callKey.startsWith('ask:')) return;
  const payload = row.payload === null ? null : (JSON.parse(row.payload) as Record<string, unknown> | null);
  let parsed: Parsed<unknown> | null = null;
  if (row.callKey.startsWith(ASK_PREFIX.exhausted)) parsed = parseExhausted(data, Array.isArray(payload?.actions) && payload.actions.includes('skip'));
  else if (row.callKey.startsWith(ASK_PREFIX.effect)) parsed = parseEffect(data);
  else if (row.callKey.startsWith(ASK_PREFIX.budget) && payload) parsed = parseBudget(data, payload as unknown as BudgetPayload);
  if (parsed && !parsed.ok) throw new InvalidArgumentError(`decide(): approval ${row.id} ("${row.name}"): ${parsed.problem}.`);
}

const ASK_KEYS = ['approvers', 'timeout', 'onTimeout', 'remindEvery', 'quorum'] as const;

/** The approval options of the step's `ask` option (who decides, for how long). */
export function askOptions(ask: unknown): ApprovalOptions {
  const o: Record<string, unknown> = {};
  if (ask === undefined) return o;
  if (typeof ask !== 'object' || ask === null) throw new InvalidArgumentError(`ask must be an object { approvers, timeout, onTimeout, remindEvery, quorum }, got ${JSON.stringify(ask)}.`);
  for (const k of Object.keys(ask)) {
    if (!(ASK_KEYS as readonly string[]).includes(k)) throw new InvalidArgumentError(`ask: unknown option "${k}" (known: ${ASK_KEYS.join(', ')}).`);
    const v = (ask as Record<string, unknown>)[k];
    if (v !== undefined) o[k] = v;
  }
  return o as ApprovalOptions;
}
