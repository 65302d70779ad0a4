/**
 * @module machine/diagram
 * A state machine drawn from its definition: its edges as data (the dashboard lays them out as
 * SVG), and Mermaid's `stateDiagram-v2` text for documents (`machineDiagram`).
 */
import { InvalidArgumentError } from '../errors.ts';
import type { Workflow } from '../workflow.ts';
import { machineOf, type MachineSpec } from './machine.ts';

/** One arrow of a machine: the event (or timeout) that moves it from one state to another. */
export interface MachineEdge {
  from: string;
  to: string;
  event: string;
  /** Taken only if its guard passes. */
  guarded: boolean;
}

/** A machine's states and arrows, for drawing it. */
export interface MachineGraph {
  initial: string;
  states: Array<{ name: string; final: boolean; description?: string }>;
  edges: MachineEdge[];
}

/** Every arrow of a machine, state by state in definition order. */
function edgesOf(spec: MachineSpec): MachineEdge[] {
  const out: MachineEdge[] = [];
  for (const s of spec.states.values()) {
    for (const [event, edges] of s.on) for (const e of edges) out.push({ from: s.name, to: e.target, event, guarded: !!e.guard });
    for (const t of s.after) for (const e of t.edges) out.push({ from: s.name, to: e.target, event: t.event, guarded: !!e.guard });
  }
  return out;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function specOf(wf: Workflow<any, any, any>, what: string): MachineSpec {
  const spec = machineOf(wf as Workflow);
  if (!spec) throw new InvalidArgumentError(`${what}() takes a workflow made by machine(name, definition).`);
  return spec;
}

/** The states and arrows of a workflow made by `machine()`, for drawing it (the dashboard does). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function machineGraph(wf: Workflow<any, any, any>): MachineGraph {
  const spec = specOf(wf, 'machineGraph');
  return {
    initial: spec.initial,
    states: [...spec.states.values()].map((s) => ({ name: s.name, final: s.final, ...(s.description ? { description: s.description } : {}) })),
    edges: edgesOf(spec),
  };
}

/** Mermaid needs identifiers: a state name with other characters is given an alias. */
function mermaidIds(spec: MachineSpec): Map<string, string> {
  const ids = new Map<string, string>();
  let n = 0;
  for (const name of spec.states.keys()) ids.set(name, /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `s${++n}`);
  return ids;
}

/**
 * The machine of a workflow made by `machine()` as a Mermaid `stateDiagram-v2`: its initial state,
 * every transition labelled with its event (`[guard]` when a guard decides), and its final states.
 * @example
 * console.log(machineDiagram(order));   // paste into any Markdown that renders Mermaid
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function machineDiagram(wf: Workflow<any, any, any>): string {
  const spec = specOf(wf, 'machineDiagram');
  const ids = mermaidIds(spec);
  const id = (s: string): string => ids.get(s) as string;
  const lines = ['stateDiagram-v2'];
  for (const [name, alias] of ids) if (alias !== name) lines.push(`  state "${name}" as ${alias}`);
  lines.push(`  [*] --> ${id(spec.initial)}`);
  for (const e of edgesOf(spec)) lines.push(`  ${id(e.from)} --> ${id(e.to)}: ${e.event}${e.guarded ? ' [guard]' : ''}`);
  for (const s of spec.states.values()) if (s.final) lines.push(`  ${id(s.name)} --> [*]`);
  return `${lines.join('\n')}\n`;
}
