/**
 * @module commands/signal
 * `engine.signal`: an event sent to a task, received by `ctx.waitForEvent(name)`. Events sent
 * before the task waits are kept; with an idempotency key a repeated send is recorded once and gets
 * the first answer (the same key with another signal is a CONFLICT).
 */
import { SIGNAL_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { ConflictError, IllegalTransitionError, InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import { isFinished, userEvents } from '../lifecycle.ts';
import { checkSentPayload, encodeArgument } from '../limits.ts';
import { decodeJson } from '../serialize.ts';
import type { SignalRow, Store, TaskRow, WakeEvent } from '../store.ts';
import { checkKey, checkText } from '../text-rules.ts';
import { jsonEqual } from '../json-equal.ts';
import { RESERVED_SIGNAL_PREFIX } from '../approvals/policy.ts';
import { MACHINE_SIGNAL_PREFIX } from '../machine/machine.ts';
import { actorOf, taskRow, type CommandContext } from './context.ts';
import type { SignalOptions, SignalResult } from './options.ts';

/** Refuses a signal name that is malformed or reserved (approvals, state machines' events). */
function checkSignalName(name: string): void {
  if (typeof name !== 'string' || !/^[^|]{1,200}$/.test(name)) throw new InvalidArgumentError('A signal needs a name of 1-200 characters without "|".');
  checkText(name, `The signal name ${JSON.stringify(name)}`);
  if (name.startsWith(RESERVED_SIGNAL_PREFIX)) {
    throw new InvalidArgumentError(
      `Signal names starting with "${RESERVED_SIGNAL_PREFIX}" are reserved for approvals: decide an approval with engine.decide(approvalId, …) / \`stepwise approve\`.`,
    );
  }
  if (name.startsWith(MACHINE_SIGNAL_PREFIX)) {
    throw new InvalidArgumentError(
      `Signal names starting with "${MACHINE_SIGNAL_PREFIX}" are reserved for the events of state machines: send one with engine.send(id, event, payload) / \`stepwise send\`.`,
    );
  }
}

/** Refuses a signal the task cannot take: a succeeded or cancelled task, or (`requireWaiting`) one not waiting for it. */
function checkTakes(task: TaskRow, name: string, requireWaiting: boolean | undefined): string[] | null {
  // A failed task may be retried: a signal sent to it is kept (a corrected payload replaces the
  // one its wait received when the task is retried). Succeeded and cancelled tasks take none.
  if (isFinished(task.status) && task.status !== 'failed') throw new IllegalTransitionError(task.status, 'signal', userEvents(task), task.id);
  const awaited = task.status === 'waiting' ? (task.waitEvents ?? []) : null;
  if (requireWaiting && task.status !== 'running' && !awaited?.includes(name)) {
    throw new ConflictError(
      `Task ${task.id} is not waiting for "${name}": ${awaited?.length ? `it waits for ${awaited.map((n) => `"${n}"`).join(', ')}` : `it is ${task.status} and waits for no event`}. Nothing was sent.`,
      { recorded: { status: task.status, waitingFor: awaited ?? [] } },
    );
  }
  return awaited;
}

export async function sendSignal(ctx: CommandContext, id: string, name: string, payload: unknown, options: SignalOptions): Promise<SignalResult> {
  checkOptionKeys(options, SIGNAL_OPTIONS, 'engine.signal()');
  const store = await ctx.open();
  const actor = actorOf(options.by);
  checkSignalName(name);
  const key = options.idempotencyKey;
  if (key !== undefined) checkKey(key, "A signal's idempotencyKey");
  const encoded = encodeArgument(payload, `The payload of signal "${name}"`, ctx.limits.payloadBytes, 'payloadBytes');
  const task = await taskRow(store, id);
  checkSentPayload(ctx.workflows.get(task.workflow)?.options.signals?.[name], task, `signal "${name}"`, payload);
  // A signal sent again with its key gets the first answer, also after the task finished; the
  // same key with another payload is a conflict the sender must hear of.
  const repeat = key === undefined ? undefined : await signalByKey(store, id, key);
  if (repeat) return { ...repeated(id, name, encoded, key as string, repeat), status: task.status };
  const awaited = checkTakes(task, name, options.requireWaiting);
  const wake: WakeEvent = { reason: 'task', taskId: id, workflow: task.workflow };
  const res = await store.insertSignal({ taskId: id, name, payload: encoded, idempotencyKey: key ?? null, at: ctx.clock.now(), actorKind: actor.kind, actorId: actor.id, notify: wake });
  if (!res) throw new TaskNotFoundError(id);
  if (!res.created) {
    // Another call with the same key won the race: its signal is the answer.
    const first = await signalByKey(store, id, key as string);
    if (first) return { ...repeated(id, name, encoded, key as string, first), status: task.status };
  }
  ctx.deliver(wake);
  ctx.appended(id);
  return { created: true, delivered: awaited?.includes(name) ? 'waiting' : 'queued', status: task.status };
}

async function signalByKey(store: Store, id: string, key: string): Promise<SignalRow | undefined> {
  return store.getSignalByKey(id, key);
}

/** The answer to a signal sent again with the key of `first`. */
function repeated(id: string, name: string, payload: string | null, key: string, first: SignalRow): Omit<SignalResult, 'status'> {
  if (first.name !== name || !jsonEqual(decodeJson(first.payload), decodeJson(payload))) {
    throw new ConflictError(
      `Signal key "${key}" of task ${id} was used for signal "${first.name}" with another payload: a repeated send must be the same signal. Use a new key for a new signal.`,
      { recorded: { name: first.name, payload: decodeJson(first.payload) } },
    );
  }
  return { created: false, delivered: first.consumedSeq === null ? 'queued' : 'consumed' };
}
