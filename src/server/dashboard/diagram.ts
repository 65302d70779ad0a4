/**
 * @module server/dashboard/diagram
 * Diagrams as inline SVG, with the current node highlighted: the task lifecycle, drawn from
 * `lifecycleEdges()` (the same table every status write goes through) on a fixed grid (active
 * statuses left and middle, finished ones right), and a state machine, drawn from
 * `machineGraph()` in layers (a state one event further from the initial state one column
 * further right). Each arrow's events are its tooltip and label.
 */
import { ALL_STATUSES, lifecycleEdges, type MachineGraph, type TaskStatus } from '../../index.ts';
import { esc } from './html.ts';

const GRID: Record<string, [number, number]> = {
  pending: [0, 1],
  running: [1, 1],
  waiting: [1, 0],
  paused: [1, 2],
  cancelling: [2, 2],
  succeeded: [3, 0],
  failed: [3, 1],
  cancelled: [3, 2],
};
const W = 120;
const H = 34;
const COL = 190;
const ROW = 90;

interface Graph {
  /** Nodes with their cell (column, row). */
  nodes: Array<{ id: string; cell: [number, number]; final?: boolean }>;
  edges: Array<{ from: string; to: string; event: string }>;
  current: string | null;
  className: string;
  label: string;
}

export function lifecycleSvg(current: TaskStatus | null): string {
  let extra = 0;
  return graphSvg({
    nodes: ALL_STATUSES.map((s) => ({ id: s, cell: GRID[s] ?? [extra % 4, 3 + Math.floor(extra++ / 4)] })),
    edges: lifecycleEdges().filter((e) => e.from !== e.to),
    current,
    className: 'lifecycle',
    label: `Task lifecycle; current status ${current ?? 'none'}`,
  });
}

/** A state machine in layers from its initial state; states it cannot reach come last. */
export function machineSvg(graph: MachineGraph, current: string | null): string {
  const depth = new Map<string, number>([[graph.initial, 0]]);
  for (let queue = [graph.initial]; queue.length;) {
    const next: string[] = [];
    for (const s of queue) {
      for (const e of graph.edges) {
        if (e.from === s && !depth.has(e.to)) {
          depth.set(e.to, (depth.get(s) as number) + 1);
          next.push(e.to);
        }
      }
    }
    queue = next;
  }
  const last = Math.max(...depth.values()) + 1;
  const rows = new Map<number, number>();
  const nodes = graph.states.map((s) => {
    const col = depth.get(s.name) ?? last;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    return { id: s.name, cell: [col, row] as [number, number], final: s.final };
  });
  return graphSvg({ nodes, edges: graph.edges, current, className: 'machine', label: `State machine; current state ${current ?? 'none'}` });
}

function graphSvg(g: Graph): string {
  const pos = new Map(g.nodes.map((n) => [n.id, n.cell]));
  const center = (s: string): [number, number] => {
    const [c, r] = pos.get(s) as [number, number];
    return [20 + c * COL + W / 2, 40 + r * ROW + H / 2];
  };
  // One arrow per (from, to) pair, labelled with every event on it.
  const arrows = new Map<string, { from: string; to: string; events: string[] }>();
  for (const e of g.edges) {
    const k = `${e.from}>${e.to}`;
    const a = arrows.get(k) ?? { from: e.from, to: e.to, events: [] };
    if (!a.events.includes(e.event)) a.events.push(e.event);
    arrows.set(k, a);
  }
  const lines: string[] = [];
  for (const a of arrows.values()) {
    const title = `<title>${esc(`${a.from} → ${a.to}: ${a.events.join(', ')}`)}</title>`;
    if (a.from === a.to) {
      // A state entered again from itself: a loop over its box.
      const [x, y] = center(a.from);
      const top = y - H / 2;
      lines.push(`<path class="edge" d="M${x - 12},${top} C${x - 34},${top - 34} ${x + 34},${top - 34} ${x + 12},${top}" marker-end="url(#arrow)">${title}</path>`);
      lines.push(`<text class="edge-label" x="${x}" y="${top - 28}">${esc(a.events.join(', '))}</text>`);
      continue;
    }
    const [x1, y1] = center(a.from);
    const [x2, y2] = center(a.to);
    const back = arrows.has(`${a.to}>${a.from}`) ? (a.from < a.to ? 1 : -1) : 0;
    // Two arrows between the same pair are bent apart so that both stay readable.
    const mx = (x1 + x2) / 2 + back * (y2 - y1) * 0.25;
    const my = (y1 + y2) / 2 - back * (x2 - x1) * 0.25;
    const [ex, ey] = edgePoint(x2, y2, mx, my);
    const [sx, sy] = edgePoint(x1, y1, mx, my);
    lines.push(`<path class="edge" d="M${sx.toFixed(1)},${sy.toFixed(1)} Q${mx.toFixed(1)},${my.toFixed(1)} ${ex.toFixed(1)},${ey.toFixed(1)}" marker-end="url(#arrow)">${title}</path>`);
    lines.push(`<text class="edge-label" x="${mx.toFixed(1)}" y="${(my - 3).toFixed(1)}">${esc(a.events.join(', '))}</text>`);
  }
  const nodes = g.nodes.map((n) => {
    const [c, r] = n.cell;
    const cls = `node${n.id === g.current ? ' current' : ''}${n.final ? ' final' : ''}`;
    return `<g class="${cls}" data-status="${esc(n.id)}"><rect x="${20 + c * COL}" y="${40 + r * ROW}" width="${W}" height="${H}" rx="8"/><text x="${20 + c * COL + W / 2}" y="${40 + r * ROW + H / 2 + 5}">${esc(n.id)}</text></g>`;
  });
  const cols = Math.max(...g.nodes.map((n) => n.cell[0])) + 1;
  const rows = Math.max(...g.nodes.map((n) => n.cell[1])) + 1;
  return `<svg class="${g.className}" role="img" aria-label="${esc(g.label)}" viewBox="0 0 ${40 + (cols - 1) * COL + W} ${60 + (rows - 1) * ROW + H}" xmlns="http://www.w3.org/2000/svg">
<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>
${lines.join('\n')}
${nodes.join('\n')}
</svg>`;
}

/** Where the line from a box's centre towards (tx, ty) leaves the box. */
function edgePoint(cx: number, cy: number, tx: number, ty: number): [number, number] {
  const dx = tx - cx;
  const dy = ty - cy;
  const scale = Math.min(dx === 0 ? Infinity : W / 2 / Math.abs(dx), dy === 0 ? Infinity : H / 2 / Math.abs(dy));
  return [cx + dx * scale, cy + dy * scale];
}
