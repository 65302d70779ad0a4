/**
 * @module commands/decisions
 * The commands that answer a waiting task through its approvals and events: `engine.decide`,
 * `engine.decideEffect`, `engine.approvals` and a state machine's `engine.send`. The decisions
 * themselves live in approvals/ and machine/; this module hands them the engine's store, clock,
 * limits and news.
 */
import { SEND_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { InvalidArgumentError } from '../errors.ts';
import { notify } from '../observers.ts';
import { decide as decideApproval, listApprovals } from '../approvals/decide.ts';
import type { ApprovalInfo, ApprovalsQuery, DecideOptions } from '../approvals/types.ts';
import { EFFECT_DECISIONS, type EffectDecision } from '../idempotency/at-most-once.ts';
import { effectApprovalOf } from '../idempotency/effect-approval.ts';
import { machineOf } from '../machine/machine.ts';
import { sendEvent, type SendResult } from '../machine/send.ts';
import type { WakeEvent } from '../store.ts';
import { actorOf, taskRow, type CommandContext } from './context.ts';
import type { SignalOptions } from './options.ts';

/** Tells this process that a decision or an event made `taskId` runnable. */
function delivered(ctx: CommandContext): (wake: WakeEvent, taskId: string) => void {
  return (wake, taskId) => {
    ctx.deliver(wake);
    ctx.appended(taskId);
  };
}

export async function decide(ctx: CommandContext, approvalId: string, options: DecideOptions): Promise<ApprovalInfo> {
  const store = await ctx.open();
  return decideApproval(
    {
      store,
      clock: ctx.clock,
      payloadBytes: ctx.limits.payloadBytes,
      delivered: delivered(ctx),
      tell: (n) => notify(ctx.observers, 'onApproval', n),
      hasObservers: ctx.observers.some((o) => typeof o.onApproval === 'function'),
    },
    approvalId,
    options,
  );
}

export async function approvals(ctx: CommandContext, query: ApprovalsQuery): Promise<ApprovalInfo[]> {
  return listApprovals(await ctx.open(), query);
}

export async function decideEffect(ctx: CommandContext, taskId: string, step: string, decision: EffectDecision, options: SignalOptions & { result?: unknown }): Promise<ApprovalInfo> {
  if (!EFFECT_DECISIONS.includes(decision)) throw new InvalidArgumentError(`decision must be one of ${EFFECT_DECISIONS.join(', ')}, got ${JSON.stringify(decision)}.`);
  if (typeof step !== 'string' || !step) throw new InvalidArgumentError('decideEffect needs the step id (its name, with #n from its second occurrence on).');
  const approvalId = await effectApprovalOf(await approvals(ctx, { taskId, limit: 1000 }), taskId, step);
  const by = options.by === undefined ? 'operator' : typeof options.by === 'string' ? options.by : options.by.id;
  return decide(ctx, approvalId, {
    approve: true,
    by,
    data: { action: decision, ...(decision === 'skip' ? { result: options.result ?? null } : {}) },
    ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
  });
}

export async function send(ctx: CommandContext, id: string, event: string, payload: unknown, options: SignalOptions): Promise<SendResult> {
  checkOptionKeys(options, SEND_OPTIONS, 'engine.send()');
  const store = await ctx.open();
  return sendEvent(
    {
      store,
      now: () => ctx.clock.now(),
      payloadBytes: ctx.limits.payloadBytes,
      machineOf: (workflow) => machineOf(ctx.workflows.get(workflow)),
      task: (taskId) => taskRow(store, taskId),
      delivered: delivered(ctx),
    },
    id,
    event,
    payload,
    actorOf(options.by),
    options.idempotencyKey,
  );
}
