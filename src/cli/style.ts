/**
 * @module cli/style
 * Colours (only on a terminal, and not under NO_COLOR), timestamps and plain-text tables of the
 * CLI's human output.
 */
const tty = process.stdout.isTTY === true && !process.env.NO_COLOR;
const paint =
  (code: number) =>
  (s: string): string =>
    tty ? `\x1b[${code}m${s}\x1b[0m` : s;
export const dim = paint(2);
export const bold = paint(1);
const green = paint(32);
export const red = paint(31);
export const yellow = paint(33);
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
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c + ' '.repeat((widths[i] as number) - visible(c)))
      .join('  ')
      .trimEnd();
  return [bold(line(header)), ...rows.map(line)].join('\n');
}
