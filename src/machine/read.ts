/**
 * @module machine/read
 * A state machine's task as users read it: the state it is in, its context, the events it takes
 * now, and the states it went through, all read from its journal (the `state:<name>` steps) and its
 * task row (what it waits for). Needs no definition, so a process without the machine's code (the
 * CLI, a dashboard) shows it too.
 */
import { decodeJson } from '../serialize.ts';
import type { StepRow, TaskRow } from '../store.ts';
import type { Actor } from '../task-events.ts';
import { MACHINE_SIGNAL_PREFIX, REFUSED_STEP_PREFIX, STATE_STEP_PREFIX, type StateRecord } from './machine.ts';

/** One state a machine entered. */
export interface MachineStep {
  state: string;
  /** The event that led there and the state it left (`null` for the initial state). */
  event: string | null;
  from: string | null;
  by: Actor | null;
  at: number;
}

/** What `engine.get(id).machine` says of a state machine's task. */
export interface MachineInfo {
  /** The state it is in (for a finished task, the state it ended in). */
  state: string;
  context: unknown;
  /** When it entered that state. */
  since: number;
  /** The events it takes now: its state's, while it waits for them; none while busy or ended. */
  legalEvents: string[];
  /** The states it entered, oldest first, and what led to each. */
  history: MachineStep[];
  /** Events it received and refused (every guard said no), oldest first. */
  refused: Array<{ state: string; event: string; by: Actor | null; at: number | null }>;
}

const baseName = (id: string): string => id.replace(/#\d+$/, '');

/** The states recorded in a journal, in the order the code received them. */
function records(workflow: string, steps: readonly StepRow[]): Array<{ row: StepRow; record: StateRecord }> {
  const out: Array<{ row: StepRow; record: StateRecord }> = [];
  for (const row of steps) {
    if (row.status !== 'completed' || row.kind !== 'step' || !row.name.startsWith(STATE_STEP_PREFIX)) continue;
    const record = decodeJson(row.output) as StateRecord | null;
    if (record && typeof record === 'object' && record.machine === workflow && `${STATE_STEP_PREFIX}${record.state}` === baseName(row.name)) out.push({ row, record });
  }
  return out.sort((a, b) => (a.row.done ?? a.row.seq) - (b.row.done ?? b.row.seq));
}

/** The machine's state and context as its journal records them, or null (not a machine, or not started). */
export function currentState(task: TaskRow, steps: readonly StepRow[]): StateRecord | null {
  return records(task.workflow, steps).at(-1)?.record ?? null;
}

/** The events a machine's task takes now: those it waits for, while it waits. */
export function legalEventsOf(task: Pick<TaskRow, 'status' | 'waitEvents'>): string[] {
  if (task.status !== 'waiting' || !task.waitEvents) return [];
  return task.waitEvents.filter((e) => e.startsWith(MACHINE_SIGNAL_PREFIX)).map((e) => e.slice(MACHINE_SIGNAL_PREFIX.length));
}

/** `engine.get(id).machine`, or undefined for a task that is not a machine's. */
export function machineInfo(task: TaskRow, steps: readonly StepRow[]): MachineInfo | undefined {
  const entered = records(task.workflow, steps);
  const last = entered.at(-1)?.record;
  if (!last) return undefined;
  const refused: MachineInfo['refused'] = [];
  for (const row of steps) {
    if (row.status !== 'completed' || !row.name.startsWith(REFUSED_STEP_PREFIX)) continue;
    const r = decodeJson(row.output) as { machine?: string; state?: string; event?: string; by?: Actor | null } | null;
    if (r?.machine === task.workflow && typeof r.state === 'string' && typeof r.event === 'string') refused.push({ state: r.state, event: r.event, by: r.by ?? null, at: row.finishedAt });
  }
  return {
    state: last.state,
    context: last.context,
    since: last.at,
    legalEvents: legalEventsOf(task),
    history: entered.map(({ record: r }) => ({ state: r.state, event: r.event, from: r.from, by: r.by, at: r.at })),
    refused,
  };
}
