/**
 * @module machine/types
 * Business state machines (`machine(name, definition)`): the definition users write (states, the
 * events each takes, guards, context updates, entry actions, timeouts, final states), and its
 * checks at definition time, so that a typo in a target or an event name fails when the module
 * loads, not when a task reaches it.
 */
import { toMs } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { Actor } from '../task-events.ts';
import type { WorkflowContext } from '../workflow.ts';

/** An event as guards and context updates see it. */
export interface MachineEvent {
  /** The event's name (`after` timeouts: `after:<duration>`). */
  type: string;
  /** What the sender passed (`engine.send(id, type, payload)`), or what an entry action returned. */
  payload: unknown;
  /** Who sent it: a user, or the worker for an entry action's event and a timeout. */
  by: Actor;
}

/** One way an event leaves a state. */
export interface TransitionSpec<C> {
  /** The state the event leads to (the same state: entered again, its entry action runs again). */
  target: string;
  /**
   * Whether the event may take this transition: a pure function of the context and the event
   * (no I/O, no clock: it is run again when the task replays). A list of transitions takes the
   * first whose guard passes; when none does, the event is refused.
   */
  guard?: (context: C, event: MachineEvent) => boolean;
  /** The context after the transition (JSON data), from the context and the event. Pure, as `guard`. */
  assign?: (context: C, event: MachineEvent) => C;
  /** Shown in diagrams. */
  description?: string;
}

/** A target state's name, a transition, or guarded transitions tried in order. */
export type Transition<C> = string | TransitionSpec<C> | ReadonlyArray<TransitionSpec<C>>;

/** What an entry action hands the machine: the next event (its name, or with a payload), and the context from now on. */
export type EntryResult<C> = void | undefined | string | { event?: string; payload?: unknown; context?: C };

export interface EntryArgs<C, I> {
  context: C;
  state: string;
  input: I;
  /** The event that led here (`null` for the initial state). */
  event: MachineEvent | null;
}

export interface StateConfig<C, I> {
  /**
   * Durable work done on entering the state: workflow code (`ctx.step`, `ctx.approval`, …), run
   * once per entry and replayed after a crash. Return an event of `on` to move on (a string, or
   * `{ event, payload, context }`); return nothing to wait for events sent to the task. While it
   * runs, the machine takes no events.
   */
  entry?: (ctx: WorkflowContext, args: EntryArgs<C, I>) => EntryResult<C> | Promise<EntryResult<C>>;
  /** The events the state takes, and where each leads. */
  on?: Readonly<Record<string, Transition<C>>>;
  /**
   * Timeouts of the wait for events, from when the state was entered: `{ '2h': 'expired' }`. The
   * earliest one that passes moves the machine as an event `after:<duration>` would.
   */
  after?: Readonly<Record<string, Transition<C>>>;
  /** A final state: the task succeeds with the machine's output when it gets here. */
  type?: 'final';
  description?: string;
}

export interface MachineDefinition<C = unknown, I = unknown> {
  /** The state a task starts in. */
  initial: string;
  /** The context a task starts with, from its input (default: the input itself). Pure. */
  context?: (input: I) => C;
  states: Readonly<Record<string, StateConfig<C, I>>>;
  /** The task's output when it reaches a final state (default `{ state, context }`). */
  output?: (context: C, state: string) => unknown;
}

/** A checked transition: target, guard, update. */
export interface Edge<C = unknown> {
  event: string;
  target: string;
  guard?: (context: C, event: MachineEvent) => boolean;
  assign?: (context: C, event: MachineEvent) => C;
  description?: string;
}

/** A state after the checks: its transitions by event, its timeouts by delay (ms, earliest first). */
export interface CheckedState<C = unknown> {
  name: string;
  final: boolean;
  entry?: StateConfig<C, unknown>['entry'];
  on: ReadonlyMap<string, readonly Edge<C>[]>;
  after: ReadonlyArray<{ ms: number; event: string; edges: readonly Edge<C>[] }>;
  description?: string;
}

/** An event name: what `engine.send` and the signal it becomes can carry. */
export const EVENT_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,99}$/;
/** State names appear in step ids (`state:<name>`): no `#`, `|` or spaces; the same rule as event names. */
const STATE_NAME = EVENT_NAME;

/** Checks a definition and turns it into the states the machine runs. */
export function checkMachine<C, I>(name: string, def: MachineDefinition<C, I>): ReadonlyMap<string, CheckedState<C>> {
  const where = `machine("${name}")`;
  const bad = (why: string): InvalidArgumentError => new InvalidArgumentError(`${where}: ${why}`);
  if (typeof def !== 'object' || def === null) throw bad('the definition must be { initial, states, context?, output? }.');
  const known = ['initial', 'context', 'states', 'output'];
  const unknown = Object.keys(def).filter((k) => !known.includes(k));
  if (unknown.length) throw bad(`unknown key${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${known.join(', ')}).`);
  if (typeof def.states !== 'object' || def.states === null || !Object.keys(def.states).length) throw bad('states must name at least one state.');
  for (const fn of ['context', 'output'] as const) {
    if (def[fn] !== undefined && typeof def[fn] !== 'function') throw bad(`${fn} must be a function.`);
  }
  const names = Object.keys(def.states);
  for (const s of names) if (!STATE_NAME.test(s)) throw bad(`state name ${JSON.stringify(s)} is not valid: 1-100 letters, digits and _ . : / - (no spaces, "#" or "|").`);
  if (typeof def.initial !== 'string' || !names.includes(def.initial)) throw bad(`initial must be one of the states (${names.join(', ')}), got ${JSON.stringify(def.initial)}.`);
  const states = new Map<string, CheckedState<C>>();
  const stateKeys = ['entry', 'on', 'after', 'type', 'description'];
  for (const s of names) {
    const config = def.states[s] as StateConfig<C, I>;
    const at = `state "${s}"`;
    if (typeof config !== 'object' || config === null) throw bad(`${at} must be an object ({ entry?, on?, after?, type? }).`);
    const extra = Object.keys(config).filter((k) => !stateKeys.includes(k));
    if (extra.length) throw bad(`${at}: unknown key${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')} (known: ${stateKeys.join(', ')}).`);
    if (config.type !== undefined && config.type !== 'final') throw bad(`${at}: type must be 'final' or left out.`);
    const final = config.type === 'final';
    if (config.entry !== undefined && typeof config.entry !== 'function') throw bad(`${at}: entry must be a function (ctx, { context, state, input, event }).`);
    if (final && (config.entry || config.on || config.after)) throw bad(`${at} is final: it has no entry action, events or timeouts (the task ends there).`);
    const on = new Map<string, Edge<C>[]>();
    for (const [event, t] of Object.entries(config.on ?? {})) {
      if (!EVENT_NAME.test(event) || event.startsWith('after:'))
        throw bad(`${at}: event name ${JSON.stringify(event)} is not valid: 1-100 letters, digits and _ . : / - (not starting with "after:").`);
      on.set(event, edgesOf(t, event, `${at}, event "${event}"`, names, bad));
    }
    const after: Array<{ ms: number; event: string; edges: Edge<C>[] }> = [];
    for (const [delay, t] of Object.entries(config.after ?? {})) {
      const ms = toMs(delay, `${where}: ${at}, after "${delay}"`);
      if (ms <= 0) throw bad(`${at}: after "${delay}" must be longer than 0.`);
      const event = `after:${delay}`;
      after.push({ ms, event, edges: edgesOf(t, event, `${at}, after "${delay}"`, names, bad) });
    }
    after.sort((a, b) => a.ms - b.ms);
    if (!final && !config.entry && !on.size && !after.length) throw bad(`${at} has no entry action, events or timeouts: a task there could never leave it (mark it type: 'final').`);
    states.set(s, {
      name: s,
      final,
      ...(config.entry ? { entry: config.entry as CheckedState<C>['entry'] } : {}),
      on,
      after,
      ...(config.description ? { description: config.description } : {}),
    });
  }
  return states;
}

function edgesOf<C>(t: Transition<C>, event: string, at: string, names: readonly string[], bad: (why: string) => Error): Edge<C>[] {
  const list = typeof t === 'string' ? [{ target: t }] : Array.isArray(t) ? t : [t as TransitionSpec<C>];
  if (!list.length) throw bad(`${at}: give a target state, or at least one transition.`);
  return list.map((spec, i) => {
    const here = list.length > 1 ? `${at} (transition ${i + 1})` : at;
    if (typeof spec !== 'object' || spec === null) throw bad(`${here}: a transition is a target state name or { target, guard?, assign? }.`);
    const extra = Object.keys(spec).filter((k) => !['target', 'guard', 'assign', 'description'].includes(k));
    if (extra.length) throw bad(`${here}: unknown key${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')} (known: target, guard, assign, description).`);
    if (typeof spec.target !== 'string' || !names.includes(spec.target)) throw bad(`${here}: target ${JSON.stringify(spec.target)} is not a state (states: ${names.join(', ')}).`);
    if (spec.guard !== undefined && typeof spec.guard !== 'function') throw bad(`${here}: guard must be a function (context, event) => boolean.`);
    if (spec.assign !== undefined && typeof spec.assign !== 'function') throw bad(`${here}: assign must be a function (context, event) => context.`);
    if (list.length > 1 && i < list.length - 1 && !spec.guard) throw bad(`${here}: only the last of several transitions may go without a guard (the ones after it could never be taken).`);
    return {
      event,
      target: spec.target,
      ...(spec.guard ? { guard: spec.guard } : {}),
      ...(spec.assign ? { assign: spec.assign } : {}),
      ...(spec.description ? { description: spec.description } : {}),
    };
  });
}

/** The first edge whose guard passes, or undefined (a refusal). */
export function pickEdge<C>(edges: readonly Edge<C>[] | undefined, context: C, event: MachineEvent): Edge<C> | undefined {
  return edges?.find((e) => !e.guard || e.guard(context, event) === true);
}
