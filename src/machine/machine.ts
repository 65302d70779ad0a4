/**
 * @module machine/machine
 * `machine(name, definition, options)`: a business state machine that runs as a durable workflow
 * on the same engine. The workflow function walks the machine:
 *
 * - entering a state is a step, `state:<name>`, whose output records the state, the context, the
 *   event that led there, who sent it and when (the machine's state history is its journal, and a
 *   replay re-enters the same states or reports NON_DETERMINISM);
 * - a state's entry action runs as workflow code (its steps are checkpointed) and may name the next
 *   event;
 * - otherwise the machine waits for its state's events (signals named `machine:<event>`, sent by
 *   `engine.send`, which takes one per wait: see `send.ts`) and its earliest timeout;
 * - the event's first transition whose guard passes gives the next state and context; an event
 *   refused by every guard is recorded (`refused:<event>`) and the wait goes on;
 * - a final state ends the task with the machine's output.
 *
 * Guards and context updates are pure: they run again, with the same recorded inputs, on replay.
 */
import { InvalidArgumentError, NonRetryableError } from '../errors.ts';
import { runOf } from '../run/run-of.ts';
import type { Actor } from '../task-events.ts';
import { workflow, type InputSchema, type Workflow, type WorkflowContext, type WorkflowOptions } from '../workflow.ts';
import { checkMachine, pickEdge, type CheckedState, type Edge, type MachineDefinition, type MachineEvent } from './types.ts';

/** Signals that carry a machine's events are `machine:<event>` (reserved: `engine.signal` refuses them). */
export const MACHINE_SIGNAL_PREFIX = 'machine:';
/** The step that records entering a state is `state:<name>`. */
export const STATE_STEP_PREFIX = 'state:';
/** The step that records an event its guards refused is `refused:<event>`. */
export const REFUSED_STEP_PREFIX = 'refused:';
/** The longest a wait's step id may be (the names of the events it waits for, joined). */
const WAIT_NAME_MAX = 200;

/** Who moves a machine without a sender: its entry actions, and its timeouts. */
const ENTRY_ACTOR: Actor = { kind: 'system', id: 'entry-action' };
const TIMEOUT_ACTOR: Actor = { kind: 'system', id: 'timeout' };

/** The output of a `state:<name>` step: a state the machine entered. */
export interface StateRecord {
  /** The machine's name: tells these steps apart from a workflow's own. */
  machine: string;
  state: string;
  context: unknown;
  /** The event that led here, and from which state (`null` for the initial state). */
  event: string | null;
  from: string | null;
  by: Actor | null;
  /** When the state was entered (engine clock). */
  at: number;
}

/** What a signal of a machine event carries: the sender's payload and the sender. */
export interface EventEnvelope {
  payload: unknown;
  by: Actor;
}

/** The definition a machine's workflow carries, for engines, diagrams and the dashboard. */
export interface MachineSpec {
  readonly name: string;
  readonly initial: string;
  readonly states: ReadonlyMap<string, CheckedState>;
  /** Schemas of event payloads, by event (`engine.send` checks them). */
  readonly events: Readonly<Record<string, InputSchema<unknown>>>;
}

export type MachineOptions<I, In> = Omit<WorkflowOptions<I, In>, 'signals'> & {
  /**
   * Schemas of the payloads of its events, by event name (any `{ parse(v) }`; zod works): an
   * engine that has the definition refuses a payload that fails its schema (INVALID_INPUT) before
   * anything is sent.
   */
  events?: Readonly<Record<string, InputSchema<unknown>>>;
};

const MACHINE = Symbol.for('stepwise.machine');

/** Whether a workflow was made by `machine()`. */
export function isMachine(wf: unknown): boolean {
  return typeof wf === 'object' && wf !== null && machineOf(wf as Workflow) !== undefined;
}

/** The machine behind a workflow, if it is one. */
export function machineOf(wf: Workflow | undefined): MachineSpec | undefined {
  return (wf as { [MACHINE]?: MachineSpec } | undefined)?.[MACHINE];
}

/**
 * Declares a business state machine that runs durably: states, the events each takes (with
 * guards and context updates), entry actions (workflow code), timeouts and final states. It is a
 * workflow: start it, run it and read it like one; send it events with `engine.send`, which
 * refuses an event its current state does not take (EVENT_REFUSED, naming the events it takes).
 * @example
 * export const order = machine('order', {
 *   initial: 'review',
 *   states: {
 *     review: { on: { approve: 'fulfil', reject: 'rejected' }, after: { '2d': 'expired' } },
 *     fulfil: { entry: async (ctx) => { await ctx.step('ship', () => warehouse.ship()); return 'shipped'; }, on: { shipped: 'done' } },
 *     done: { type: 'final' }, rejected: { type: 'final' }, expired: { type: 'final' },
 *   },
 * });
 */
export function machine<C = unknown, I = unknown, In = I>(name: string, definition: MachineDefinition<C, I>, options: MachineOptions<I, In> = {}): Workflow<I, unknown, In> {
  const states = checkMachine(name, definition);
  const { events = {}, ...workflowOptions } = options;
  const known = new Set([...states.values()].flatMap((s) => [...s.on.keys()]));
  for (const [event, schema] of Object.entries(events)) {
    if (!known.has(event)) throw new InvalidArgumentError(`machine("${name}"): events.${event} is not an event of any state (events: ${[...known].join(', ') || 'none'}).`);
    if (typeof (schema as { parse?: unknown } | null)?.parse !== 'function') throw new InvalidArgumentError(`machine("${name}"): events.${event} must be a schema with parse(value).`);
  }
  for (const s of states.values()) {
    const wait = [...s.on.keys()].map((e) => `${MACHINE_SIGNAL_PREFIX}${e}`).join('+');
    if (wait.length > WAIT_NAME_MAX) {
      throw new InvalidArgumentError(
        `machine("${name}"): state "${s.name}" takes too many events, or events with names too long, for one wait (their names add up to ${wait.length} characters, at most ${WAIT_NAME_MAX - s.on.size * MACHINE_SIGNAL_PREFIX.length}).`,
      );
    }
  }
  if (typeof options === 'object' && options !== null && 'signals' in options) {
    throw new InvalidArgumentError(`machine("${name}"): a machine takes events (engine.send), not signals: leave out the signals option.`);
  }
  const wf = workflow<I, unknown, In>(name, (ctx, input) => walk(ctx, input, name, definition, states as ReadonlyMap<string, CheckedState<C>>), workflowOptions);
  const spec: MachineSpec = Object.freeze({ name, initial: definition.initial, states: states as ReadonlyMap<string, CheckedState>, events: Object.freeze({ ...events }) });
  return Object.freeze({ ...wf, [MACHINE]: spec });
}

async function walk<C, I>(ctx: WorkflowContext, input: I, name: string, def: MachineDefinition<C, I>, states: ReadonlyMap<string, CheckedState<C>>): Promise<unknown> {
  const clock = runOf(ctx)?.deps.clock;
  let state = def.initial;
  let context = (def.context ? def.context(input) : input) as C;
  let via: { event: MachineEvent; from: string } | null = null;
  for (;;) {
    const entered = await ctx.step(`${STATE_STEP_PREFIX}${state}`, (): StateRecord => ({
      machine: name,
      state,
      context: context as unknown,
      event: via?.event.type ?? null,
      from: via?.from ?? null,
      by: via?.event.by ?? null,
      at: clock?.now() ?? Date.now(),
    }));
    context = entered.context as C;
    const node = states.get(state) as CheckedState<C>;
    if (node.final) return def.output ? def.output(context, state) : { state, context };
    let next: { edge: Edge<C>; event: MachineEvent } | undefined;
    if (node.entry) {
      const result = await node.entry(ctx, { context, state, input, event: via?.event ?? null });
      const r = typeof result === 'string' ? { event: result } : (result ?? {});
      if (typeof r !== 'object')
        throw new NonRetryableError(
          `machine("${name}"): the entry action of state "${state}" returned ${JSON.stringify(result)}: return an event name, { event, payload, context }, or nothing.`,
        );
      if (r.context !== undefined) context = r.context;
      if (r.event !== undefined) {
        const event: MachineEvent = { type: r.event, payload: r.payload ?? null, by: ENTRY_ACTOR };
        const edges = node.on.get(r.event);
        if (!edges)
          throw new NonRetryableError(
            `machine("${name}"): the entry action of state "${state}" returned event "${r.event}", which the state does not take (${[...node.on.keys()].map((e) => `"${e}"`).join(', ') || 'it takes none'}).`,
          );
        const edge = pickEdge(edges, context, event);
        if (!edge) throw new NonRetryableError(`machine("${name}"): the entry action of state "${state}" returned event "${r.event}", and every guard of it refused it.`);
        next = { edge, event };
      }
    }
    next ??= await waitForEvent(ctx, name, state, node, context, entered.at, clock);
    if (next.edge.assign) context = next.edge.assign(context, next.event);
    via = { event: next.event, from: state };
    state = next.edge.target;
  }
}

/**
 * Waits in `node` for one of its events (or its next timeout) that a transition takes. An event
 * every guard refuses is recorded and the wait goes on; so is a timeout every guard refuses, the
 * next timeout taking its place.
 */
async function waitForEvent<C>(
  ctx: WorkflowContext,
  name: string,
  state: string,
  node: CheckedState<C>,
  context: C,
  enteredAt: number,
  clock: { now(): number } | undefined,
): Promise<{ edge: Edge<C>; event: MachineEvent }> {
  const events = [...node.on.keys()];
  let timeouts = node.after;
  for (;;) {
    const [soonest] = timeouts;
    const left = soonest ? Math.max(0, enteredAt + soonest.ms - (clock?.now() ?? Date.now())) : undefined;
    let event: MachineEvent;
    let edge: Edge<C> | undefined;
    if (events.length) {
      const got = await ctx.waitForEvent<EventEnvelope>(
        events.map((e) => `${MACHINE_SIGNAL_PREFIX}${e}`),
        left === undefined ? {} : { timeout: left },
      );
      if (!got.timedOut) {
        const type = got.name.slice(MACHINE_SIGNAL_PREFIX.length);
        event = { type, payload: got.payload?.payload ?? null, by: got.payload?.by ?? { kind: 'user', id: 'anonymous' } };
        edge = pickEdge(node.on.get(type), context, event);
        if (edge) return { edge, event };
        await ctx.step(`${REFUSED_STEP_PREFIX}${type}`, () => ({ machine: name, state, event: type, by: event.by, reason: 'every guard of the event refused it' }));
        continue;
      }
    } else {
      await ctx.sleep(`after:${state}`, left ?? 0);
    }
    const due = soonest as NonNullable<typeof soonest>;
    event = { type: due.event, payload: null, by: TIMEOUT_ACTOR };
    edge = pickEdge(due.edges, context, event);
    if (edge) return { edge, event };
    timeouts = timeouts.slice(1);
    if (!events.length && !timeouts.length)
      throw new NonRetryableError(`machine("${name}"): state "${state}" has no events and every guard of its timeouts refused them: the machine could never leave it.`);
  }
}
