/**
 * @module server/dashboard/diagram
 * The lifecycle diagram as inline SVG, drawn from `lifecycleEdges()` (the same table every status
 * write goes through), with the task's current status highlighted. Statuses sit on a fixed grid
 * (active ones left and middle, finished ones right); an unknown status gets the next free cell.
 * Each arrow's events are its tooltip and label.
 */
import { ALL_STATUSES, lifecycleEdges, type TaskStatus } from '../../index.ts';
import { esc } from './html.ts';

const GRID: Record<string, [number, number]> = {
  pending: [0, 1], running: [1, 1], waiting: [1, 0], paused: [1, 2], cancelling: [2, 2], succeeded: [3, 0], failed: [3, 1], cancelled: [3, 2],
};
const W = 120;
const H = 34;
const COL = 190;
const ROW = 90;

export function lifecycleSvg(current: TaskStatus | null): string {
  const pos = new Map<string, [number, number]>();
  let extra = 0;
  for (const s of ALL_STATUSES) pos.set(s, GRID[s] ?? [extra % 4, 3 + Math.floor(extra++ / 4)]);
  const center = (s: string): [number, number] => {
    const [c, r] = pos.get(s) as [number, number];
    return [20 + c * COL + W / 2, 20 + r * ROW + H / 2];
  };
  // One arrow per (from, to) pair, labelled with every event on it.
  const arrows = new Map<string, { from: string; to: string; events: string[] }>();
  for (const e of lifecycleEdges()) {
    if (e.from === e.to) continue;
    const k = `${e.from}>${e.to}`;
    const a = arrows.get(k) ?? { from: e.from, to: e.to, events: [] };
    if (!a.events.includes(e.event)) a.events.push(e.event);
    arrows.set(k, a);
  }
  const lines: string[] = [];
  for (const a of arrows.values()) {
    const [x1, y1] = center(a.from);
    const [x2, y2] = center(a.to);
    const back = arrows.has(`${a.to}>${a.from}`) ? (a.from < a.to ? 1 : -1) : 0;
    // Two arrows between the same pair are bent apart so that both stay readable.
    const mx = (x1 + x2) / 2 + back * (y2 - y1) * 0.25;
    const my = (y1 + y2) / 2 - back * (x2 - x1) * 0.25;
    const [ex, ey] = edgePoint(x2, y2, mx, my);
    const [sx, sy] = edgePoint(x1, y1, mx, my);
    lines.push(`<path class="edge" d="M${sx.toFixed(1)},${sy.toFixed(1)} Q${mx.toFixed(1)},${my.toFixed(1)} ${ex.toFixed(1)},${ey.toFixed(1)}" marker-end="url(#arrow)"><title>${esc(`${a.from} → ${a.to}: ${a.events.join(', ')}`)}</title></path>`);
    lines.push(`<text class="edge-label" x="${mx.toFixed(1)}" y="${(my - 3).toFixed(1)}">${esc(a.events.join(', '))}</text>`);
  }
  const nodes = ALL_STATUSES.map((s) => {
    const [c, r] = pos.get(s) as [number, number];
    const cls = s === current ? 'node current' : 'node';
    return `<g class="${cls}" data-status="${esc(s)}"><rect x="${20 + c * COL}" y="${20 + r * ROW}" width="${W}" height="${H}" rx="8"/><text x="${20 + c * COL + W / 2}" y="${20 + r * ROW + H / 2 + 5}">${esc(s)}</text></g>`;
  });
  const rows = Math.max(...[...pos.values()].map(([, r]) => r)) + 1;
  return `<svg class="lifecycle" role="img" aria-label="Task lifecycle; current status ${esc(current ?? 'none')}" viewBox="0 0 ${40 + 3 * COL + W} ${40 + (rows - 1) * ROW + H}" xmlns="http://www.w3.org/2000/svg">
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
