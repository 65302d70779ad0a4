/**
 * @module machine/send
 * `engine.send(id, event, payload)`: an event for a state machine's task. It is taken only while
 * the machine waits in a state that takes the event and a guard lets it through; otherwise it is
 * refused at once (EVENT_REFUSED, naming the state and the events it takes) and nothing is sent.
 *
 * The event becomes the signal `machine:<event>` with the payload and the sender, recorded by
 * `Store.insertSignal` with `onlyIfAwaited`: the task must wait for that signal, and once one is
 * recorded it waits for nothing more, in the same transaction. Of two events sent at once to a
 * waiting machine exactly one is taken; the other is refused (the machine is busy), so no event
 * is ever left behind in a state that no longer takes it. Guards are checked here when this
 * engine has the machine's definition (the context they see is the one its journal records; it
 * cannot change while the machine waits), and again by the worker, which records an event every
 * guard refuses and goes on waiting (an engine without the definition, such as the CLI's, cannot
 * check them first).
 */
import { ConflictError, EventRefusedError, InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import { isFinished } from '../lifecycle.ts';
import { checkSentPayload, encodeArgument } from '../limits.ts';
import { decodeJson } from '../serialize.ts';
import { jsonEqual } from '../json-equal.ts';
import type { SignalRow, Store, TaskRow, WakeEvent } from '../store.ts';
import type { Actor } from '../task-events.ts';
import { checkKey } from '../text-rules.ts';
import { MACHINE_SIGNAL_PREFIX, type EventEnvelope, type MachineSpec } from './machine.ts';
import { currentState, legalEventsOf } from './read.ts';
import { EVENT_NAME, pickEdge } from './types.ts';

export interface SendResult {
  /** `false` when the idempotency key was used before: the first send is the answer. */
  created: boolean;
  /** The state that took the event (`null` where the engine could not tell: a repeat). */
  state: string | null;
  /** `accepted`: the machine will take it (or is taking it); `consumed`: it has (a repeat). */
  delivered: 'accepted' | 'consumed';
}

export interface SendDeps {
  store: Store;
  now: () => number;
  payloadBytes: number;
  /** The machine of a workflow, if this engine has its definition. */
  machineOf: (workflow: string) => MachineSpec | undefined;
  /** The task by id (TASK_NOT_FOUND otherwise). */
  task: (id: string) => Promise<TaskRow>;
  /** Tells this process's workers and readers: the task is due, its log grew. */
  delivered: (wake: WakeEvent, taskId: string) => void;
}

/** The event's envelope as stored: the event name, key and payload checked. */
function checkedEnvelope(deps: SendDeps, event: string, payload: unknown, actor: Actor, key: string | undefined): string {
  if (typeof event !== 'string' || !EVENT_NAME.test(event)) {
    throw new InvalidArgumentError(`An event name is 1-100 letters, digits and _ . : / - (got ${JSON.stringify(event)}).`);
  }
  if (key !== undefined) checkKey(key, `The idempotencyKey of event "${event}"`);
  return encodeArgument({ payload: payload ?? null, by: actor } satisfies EventEnvelope, `The payload of event "${event}"`, deps.payloadBytes, 'payloadBytes') as string;
}

type StateOf = () => Promise<{ state: string; context: unknown } | null>;

/**
 * Refuses, before anything is written, an event the machine cannot take: the task ended, its state
 * takes no such event, or every guard refuses it. Returns the state that takes it (null if unknown).
 */
async function checkTaken(spec: MachineSpec | undefined, task: TaskRow, stateOf: StateOf, event: string, payload: unknown, actor: Actor): Promise<string | null> {
  const id = task.id;
  if (isFinished(task.status)) {
    const at = await stateOf();
    throw new EventRefusedError(id, event, at?.state ?? null, [], 'ended', `the task has ended (${task.status})${at ? ` in state "${at.state}"` : ''}.`);
  }
  if (!spec) return null;
  const at = await stateOf();
  const node = at ? spec.states.get(at.state) : undefined;
  if (!at || !node) return null;
  const edges = node.on.get(event);
  if (!edges) {
    throw new EventRefusedError(
      id,
      event,
      at.state,
      legalEventsOf(task),
      'not-in-state',
      `state "${at.state}" takes no event "${event}" (its events: ${[...node.on.keys()].join(', ') || 'none'}).`,
    );
  }
  if (task.status === 'waiting' && legalEventsOf(task).includes(event) && !pickEdge(edges, at.context, { type: event, payload: payload ?? null, by: actor })) {
    throw new EventRefusedError(id, event, at.state, legalEventsOf(task), 'guard', `every guard of "${event}" refused it.`);
  }
  return at.state;
}

/** The refusal of an event the store would not record: the task ended, waits for other events, or is busy. */
function refusal(id: string, event: string, at: string | null, refused: { status: TaskRow['status']; waitEvents: string[] }): EventRefusedError {
  const legal = legalEventsOf({ status: refused.status, waitEvents: refused.waitEvents });
  if (isFinished(refused.status)) return new EventRefusedError(id, event, at, [], 'ended', `the task has ended (${refused.status}).`);
  if (refused.status === 'waiting' && refused.waitEvents.length) return new EventRefusedError(id, event, at, legal, 'not-in-state', `it does not wait for "${event}".`);
  return new EventRefusedError(
    id,
    event,
    at,
    legal,
    'busy',
    `it is busy (${refused.status === 'waiting' ? 'an event it took is being handled' : `${refused.status}: its state's entry action runs, or it moves between states`}); send it again once the machine waits.`,
  );
}

export async function sendEvent(deps: SendDeps, id: string, event: string, payload: unknown, actor: Actor, key: string | undefined): Promise<SendResult> {
  const envelope = checkedEnvelope(deps, event, payload, actor, key);
  const { store } = deps;
  const task = await deps.task(id);
  const sentWith = (k: string): Promise<SignalRow | undefined> => store.getSignalByKey(id, k);
  if (key !== undefined) {
    const first = await sentWith(key);
    if (first) return repeated(id, event, payload, key, first);
  }
  const spec = deps.machineOf(task.workflow);
  checkSentPayload(spec?.events[event], task, `event "${event}"`, payload);
  // What the machine's journal says of its state: for the guard, and for a refusal's message.
  const stateOf: StateOf = async () => currentState(task, await store.getSteps(id));
  const state = await checkTaken(spec, task, stateOf, event, payload, actor);
  const wake: WakeEvent = { reason: 'task', taskId: id, workflow: task.workflow };
  const res = await store.insertSignal({
    taskId: id,
    name: `${MACHINE_SIGNAL_PREFIX}${event}`,
    payload: envelope,
    idempotencyKey: key ?? null,
    at: deps.now(),
    actorKind: actor.kind,
    actorId: actor.id,
    notify: wake,
    onlyIfAwaited: true,
  });
  if (!res) throw new TaskNotFoundError(id);
  if (res.refused) throw refusal(id, event, state === null ? ((await stateOf())?.state ?? null) : state, res.refused);
  if (!res.created) {
    // Another send with the same key won the race: its event is the answer.
    const first = await sentWith(key as string);
    if (first) return repeated(id, event, payload, key as string, first);
  }
  deps.delivered(wake, id);
  return { created: true, state, delivered: 'accepted' };
}

/** The answer to an event sent again with the key of `first`. */
function repeated(id: string, event: string, payload: unknown, key: string, first: SignalRow): SendResult {
  const sent = decodeJson(first.payload) as EventEnvelope | null;
  if (first.name !== `${MACHINE_SIGNAL_PREFIX}${event}` || !jsonEqual(sent?.payload ?? null, payload ?? null)) {
    throw new ConflictError(
      `Key "${key}" of task ${id} was used for ${first.name.startsWith(MACHINE_SIGNAL_PREFIX) ? `event "${first.name.slice(MACHINE_SIGNAL_PREFIX.length)}"` : `signal "${first.name}"`} with another payload: a repeated send must be the same event. Use a new key for a new event.`,
      { recorded: { name: first.name, payload: sent?.payload ?? null } },
    );
  }
  return { created: false, state: null, delivered: first.consumedSeq === null ? 'accepted' : 'consumed' };
}
