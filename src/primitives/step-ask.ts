/**
 * @module primitives/step-ask
 * Internal: not part of the public API (the package exports only its index modules).
 * A step that parks on a person's decision at its own journal position (no position of its own,
 * so the code's call order is unchanged): the step's row waits (`waiting`, output
 * `{ approvalId, ask }`) on an approval the engine asks for, and a resumed run finds the same
 * approval through that row. Used when a step's attempts run out (`onExhausted: 'ask'`), when an
 * at-most-once step's effect cannot be verified, and when a model call would exceed the budget.
 */
import { awaitApprovalAt, type SettledApproval } from '../approvals/request.ts';
import type { ApprovalOptions } from '../approvals/types.ts';
import { decodeJson } from '../serialize.ts';
import type { StepRow } from '../store.ts';
import type { Run } from '../run/run.ts';
import type { StepCall } from './step-call.ts';

export type AskPurpose = 'exhausted' | 'effect' | 'budget';

/** The approval a step's recorded row waits on, if it parked on one. */
export function recordedAsk(row: StepRow | undefined): { approvalId: string; ask: AskPurpose } | null {
  if (!row || row.kind !== 'step' || row.status !== 'waiting' || !row.output) return null;
  const out = decodeJson(row.output) as { approvalId?: unknown; ask?: unknown } | null;
  if (!out || typeof out.approvalId !== 'string' || typeof out.ask !== 'string') return null;
  return { approvalId: out.approvalId, ask: out.ask as AskPurpose };
}

/**
 * Parks step `c` on approval `name` (asked once per `callKey`). `resume`: the run resumes a park
 * recorded by an earlier run (its row names the approval); otherwise a new one is asked for.
 */
export function stepAsk(
  run: Run,
  c: StepCall<unknown>,
  ask: { purpose: AskPurpose; callKey: string; name: string; options: ApprovalOptions; fields: Partial<StepRow>; resume: boolean },
): Promise<SettledApproval> {
  const recorded = ask.resume ? c.recorded : undefined;
  return awaitApprovalAt(run, { seq: c.seq, stepId: c.stepId, recorded, kind: 'step', callKey: ask.callKey, fields: ask.fields, tag: ask.purpose }, ask.name, ask.options, c.activity);
}

/**
 * Set on an error an attempt throws to park its step on an approval instead of failing (a model
 * call over budget): the attempt does not count, and the step attempts again once the handler
 * returns. The handler throws the run's failure when the answer is no.
 */
export const PARK_ON_STEP: unique symbol = Symbol('stepwise.parkOnStep') as never;
export type StepPark = (run: Run, c: StepCall<unknown>) => Promise<void>;

export function parkRequest(raw: unknown): StepPark | undefined {
  const park = typeof raw === 'object' && raw !== null ? (raw as { [PARK_ON_STEP]?: unknown })[PARK_ON_STEP] : undefined;
  return typeof park === 'function' ? (park as StepPark) : undefined;
}
