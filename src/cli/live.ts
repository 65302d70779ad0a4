/**
 * @module cli/live
 * Live progress on a terminal: a block of lines at the bottom (one per step in flight: a spinner,
 * the elapsed time, a bar when the step reports done/total, its note, the model tokens and cost
 * so far when the task has called a model) redrawn ten times a second,
 * with finished work printed above it as permanent lines. When the output is not a terminal (a
 * pipe, a log file, CI) nothing is redrawn: each permanent line is printed once, plainly.
 */
import { formatMs, type TaskSummary, type UsageTotals } from '../index.ts';

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface LiveItem {
  label: string;
  startedAt: number;
  done?: number;
  total?: number;
  note?: string;
  /** Model usage so far (`engine.get(id).usage.total`), shown as tokens and cost. */
  usage?: Pick<UsageTotals, 'totalTokens' | 'costUsd'>;
}

export interface LiveOutput {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

/** `[########------] 8/14`, from a step's reported progress. */
export function bar(done: number, total: number, width = 20): string {
  const frac = total > 0 ? Math.min(1, Math.max(0, done / total)) : 0;
  const full = Math.round(frac * width);
  return `[${'#'.repeat(full)}${'-'.repeat(width - full)}] ${done}/${total}`;
}

export function itemLine(item: LiveItem, frame: number, now: number): string {
  const parts = [FRAMES[frame % FRAMES.length] as string, item.label, formatMs(Math.max(0, now - item.startedAt))];
  if (item.done !== undefined && item.total !== undefined) parts.push(bar(item.done, item.total));
  else if (item.done !== undefined) parts.push(String(item.done));
  if (item.note) parts.push(item.note);
  if (item.usage && (item.usage.totalTokens > 0 || item.usage.costUsd > 0)) parts.push(usageSoFar(item.usage));
  return parts.join(' ');
}

/** `· 12,345 tokens $0.0123`: the tokens so far and their cost. */
export function usageSoFar(u: Pick<UsageTotals, 'totalTokens' | 'costUsd'>): string {
  return `· ${u.totalTokens.toLocaleString('en-US')} tokens $${u.costUsd.toFixed(4)}`;
}

/**
 * The live line of a running (or cancelling) task: its status, the step it runs (or the last one
 * that ended), the progress that step reports, and the usage so far when a model was called.
 */
export function taskItem(t: TaskSummary & { steps: ReadonlyArray<{ name: string }> }, since: number): LiveItem {
  const p = t.progress;
  const last = t.steps[t.steps.length - 1]?.name;
  return {
    label: `${t.status}${p?.step ? ` step ${p.step}` : last ? ` after ${last}` : ''}`,
    startedAt: since,
    ...(p?.done !== undefined ? { done: p.done } : {}),
    ...(p?.total !== undefined ? { total: p.total } : {}),
    ...(p?.note ? { note: p.note } : {}),
    ...(t.usage && t.usage.total.attempts > 0 ? { usage: t.usage.total } : {}),
  };
}

export class LiveBlock {
  readonly #out: LiveOutput;
  readonly #tty: boolean;
  readonly #items = new Map<string, LiveItem>();
  readonly #now: () => number;
  #drawn = 0;
  #frame = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(out: LiveOutput, options: { now?: () => number; tty?: boolean } = {}) {
    this.#out = out;
    this.#tty = options.tty ?? out.isTTY === true;
    this.#now = options.now ?? Date.now;
  }

  get live(): boolean {
    return this.#tty;
  }

  /** A permanent line (above the live block on a terminal). */
  log(line: string): void {
    if (!this.#tty) {
      this.#out.write(`${line}\n`);
      return;
    }
    this.#clear();
    this.#out.write(`${line}\n`);
    this.#draw();
  }

  /** Adds or updates a line of the live block (nothing is shown off a terminal). */
  set(key: string, item: LiveItem): void {
    if (!this.#tty) return;
    this.#items.set(key, item);
    this.#timer ??= setInterval(() => this.tick(), 100);
    this.#timer.unref?.();
    this.tick();
  }

  remove(key: string): void {
    if (!this.#items.delete(key) || !this.#tty) return;
    this.tick();
    if (!this.#items.size) this.#stopTimer();
  }

  /** Redraws the block (called by the timer; exposed so tests can draw frames). */
  tick(): void {
    if (!this.#tty) return;
    this.#frame++;
    this.#clear();
    this.#draw();
  }

  /** Clears the block and stops redrawing. */
  stop(): void {
    this.#items.clear();
    if (this.#tty) this.#clear();
    this.#stopTimer();
  }

  #stopTimer(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  #clear(): void {
    // Up one line and erase it, for each line of the block drawn last time.
    if (this.#drawn) this.#out.write('\x1b[1A\x1b[2K'.repeat(this.#drawn) + '\r');
    this.#drawn = 0;
  }

  #draw(): void {
    // A terminal that reports no size (0 columns, as under script(1) without one) gets 100.
    const width = Math.max(20, (this.#out.columns || 100) - 1);
    const now = this.#now();
    const lines = [...this.#items.values()].map((item) => {
      const line = itemLine(item, this.#frame, now);
      return line.length > width ? `${line.slice(0, width - 1)}…` : line;
    });
    if (lines.length) this.#out.write(`${lines.join('\n')}\n`);
    this.#drawn = lines.length;
  }
}
