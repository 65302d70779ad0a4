/**
 * @module cli/format
 * Human output of the CLI: tables, timelines, durations. `--json` bypasses all of it.
 */
import { formatMs, type HistoryEntry, type StepInfo, type TaskInfo, type TaskSummary } from '../index.ts';

const tty = process.stdout.isTTY === true && !process.env.NO_COLOR;
const paint = (code: number) => (s: string): string => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
export const dim = paint(2);
export const bold = paint(1);
const green = paint(32);
const red = paint(31);
const yellow = paint(33);
const cyan = paint(36);

export function colorStatus(status: string): string {
  if (status === 'succeeded' || status === 'completed') return green(status);
  if (status === 'failed' || status === 'cancelled') return red(status);
  if (status === 'running' || status === 'cancelling') return cyan(status);
  return yellow(status);
}

export function time(ms: number | null): string {
  return ms === null ? '-' : new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}

/** A plain-text table; widths from the visible text (ANSI colours ignored). */
export function table(header: string[], rows: string[][]): string {
  // eslint-disable-next-line no-control-regex -- ANSI colour codes start with ESC
  const visible = (s: string): number => s.replace(/\x1b\[[0-9;]*m/g, '').length;
  const widths = header.map((h, i) => Math.max(visible(h), ...rows.map((r) => visible(r[i] ?? ''))));
  const line = (cells: string[]): string => cells.map((c, i) => c + ' '.repeat((widths[i] as number) - visible(c))).join('  ').trimEnd();
  return [bold(line(header)), ...rows.map(line)].join('\n');
}

export function taskTable(tasks: TaskSummary[]): string {
  if (!tasks.length) return dim('(no tasks)');
  return table(
    ['ID', 'WORKFLOW', 'STATUS', 'RUNS', 'CREATED', 'UPDATED'],
    tasks.map((t) => [t.id, `${t.workflow}@${t.workflowVersion}`, colorStatus(t.status), String(t.runs), time(t.createdAt), time(t.updatedAt)]),
  );
}

function stepRow(s: StepInfo): string[] {
  const detail = s.error ? red(s.error.message.split('\n')[0] ?? '') : s.kind !== 'step' && s.wakeAt ? dim(`until ${time(s.wakeAt)}`) : '';
  return [String(s.seq), s.kind === 'step' ? s.name : `${s.name} (${s.kind})`, colorStatus(s.status), String(s.attempts || ''), s.durationMs === null ? '-' : formatMs(s.durationMs), `e${s.epoch}`, detail];
}

function historyLine(h: HistoryEntry, start: number): string {
  const rel = `+${formatMs(h.at - start)}`.padStart(9);
  const move = h.from === h.to ? colorStatus(h.to) : `${h.from ? colorStatus(h.from) : '∅'} → ${colorStatus(h.to)}`;
  const extra = h.detail ? dim(Object.entries(h.detail).filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ')) : '';
  return `  ${dim(time(h.at))} ${dim(rel)}  ${bold(h.event.padEnd(8))} ${move}  ${h.workerId ? dim(`by ${h.workerId} `) : ''}${dim(`e${h.epoch}`)} ${extra}`.trimEnd();
}

export function taskDetail(t: TaskInfo): string {
  const out: string[] = [];
  out.push(`${bold('Task')} ${t.id}  ${colorStatus(t.status)}`);
  out.push(`  workflow   ${t.workflow} (version ${t.workflowVersion})`);
  if (t.idempotencyKey) out.push(`  key        ${t.idempotencyKey}`);
  out.push(`  created    ${time(t.createdAt)}${t.finishedAt ? `   finished ${time(t.finishedAt)} (${formatMs(t.finishedAt - t.createdAt)})` : ''}`);
  out.push(`  runs       ${t.runs}${t.retries ? `   retries ${t.retries}` : ''}   epoch ${t.epoch}`);
  if (t.lease) out.push(`  lease      ${t.lease.owner} until ${time(t.lease.expiresAt)}`);
  if (t.wait) out.push(`  waiting    ${JSON.stringify(t.wait)}`);
  if (t.pauseRequested) out.push(`  ${yellow('pause requested')}`);
  if (t.cancelReason) out.push(`  cancel     ${t.cancelReason}`);
  out.push(`  input      ${truncate(JSON.stringify(t.input) ?? 'undefined')}`);
  if (t.status === 'succeeded') out.push(`  output     ${truncate(JSON.stringify(t.output) ?? 'undefined')}`);
  if (t.status === 'failed') out.push(`  error      ${red(`[${t.error.code ?? t.error.name}] ${t.error.message}`)}`);
  out.push('', bold('Steps'));
  out.push(t.steps.length ? table(['#', 'STEP', 'STATUS', 'ATTEMPTS', 'DURATION', 'RUN', ''], t.steps.map(stepRow)) : dim('  (none yet)'));
  out.push('', bold('Timeline'));
  const start = t.history[0]?.at ?? t.createdAt;
  for (const h of t.history) out.push(historyLine(h, start));
  return out.join('\n');
}

function truncate(s: string, n = 160): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
