/**
 * @module cli/context
 * What every CLI command is given (the store URL, the parsed options, where output goes) and the
 * option readers the commands share: positional arguments, JSON arguments, whole numbers, --key,
 * --as, and an engine that is closed when the command ends.
 */
import { readFileSync } from 'node:fs';
import { Engine, InvalidArgumentError, type Workflow } from '../index.ts';
import { payloadOptionsFromEnv } from './payload-env.ts';

export interface CommandContext {
  db: string;
  json: boolean;
  args: string[];
  /** Parsed flags: a repeatable flag (`--tag`) is a list. */
  options: Record<string, string | boolean | string[] | undefined>;
  out: (line: string) => void;
  /** The terminal, for live progress (absent or not a TTY: plain lines through `out`). */
  stdout?: { write(text: string): unknown; isTTY?: boolean; columns?: number };
}

export const str = (o: CommandContext['options'], k: string): string | undefined => (typeof o[k] === 'string' ? (o[k] as string) : undefined);

export function need(ctx: CommandContext, i: number, what: string): string {
  const v = ctx.args[i];
  if (!v) throw new InvalidArgumentError(`Missing ${what}. See \`stepwise help\`.`);
  return v;
}

/**
 * JSON given on the command line: the text itself, `@path` for a file's contents, or `-` for
 * standard input (so that large inputs need not fit on a command line).
 */
export function parseJson(text: string | undefined, what: string): unknown {
  if (text === undefined) return undefined;
  let source = text;
  if (text === '-' || text.startsWith('@')) {
    const file = text === '-' ? 0 : text.slice(1);
    try {
      source = readFileSync(file, 'utf8');
    } catch (e) {
      throw new InvalidArgumentError(`${what}: cannot read ${text === '-' ? 'standard input' : file}: ${(e as Error).message}`);
    }
  }
  try {
    return JSON.parse(source);
  } catch (e) {
    throw new InvalidArgumentError(`${what} is not valid JSON: ${(e as Error).message}`);
  }
}

/** A whole number ≥ 1 (counts and milliseconds). */
export function int(ctx: CommandContext, name: string, min = 1): number | undefined {
  const v = str(ctx.options, name);
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!/^\d+$/.test(v) || !Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`--${name} must be a whole number ≥ ${min}, got "${v}"`);
  return n;
}

/** A `--name a,b` flag as its non-empty items, or undefined without the flag. */
export function listFlag(ctx: CommandContext, name: string): string[] | undefined {
  return str(ctx.options, name)
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A --key value: absent, or a non-empty key (an empty one would silently start a new task each time). */
export function keyOption(ctx: CommandContext): string | undefined {
  const key = str(ctx.options, 'key');
  if (key !== undefined && !key.trim()) throw new InvalidArgumentError('--key must not be empty: give the idempotency key, or leave --key out.');
  return key;
}

/**
 * An engine on the command's store, with `workflows` registered (the code a replay needs). Only
 * `worker` and `migrate` may create a database: for every other command a mistyped sqlite: path is
 * an error, not a new empty file.
 */
export async function withEngine<T>(ctx: CommandContext, fn: (engine: Engine) => Promise<T>, create = false, workflows: readonly Workflow[] = []): Promise<T> {
  const engine = new Engine({ store: ctx.db, workflows: [...workflows], ...payloadOptionsFromEnv(), ...(create ? {} : { sqlite: { mustExist: true } }) });
  try {
    return await fn(engine);
  } finally {
    await engine.close();
  }
}

/** `--as NAME`: who asks, recorded in the task's log. */
export function by(ctx: CommandContext): { by?: string } {
  const name = str(ctx.options, 'as');
  if (name === undefined) return {};
  if (!name.trim()) throw new InvalidArgumentError("--as must name who asks (recorded in the task's log).");
  return { by: name };
}

/** The formats of `--log` (the structured log of transitions, steps, approvals…): pino JSON lines, one readable line each, or none. */
export const LOG_FORMATS = ['json', 'pretty', 'none'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** `--log <json|pretty|none>`, or `fallback` when it is not given. */
export function logFormat(ctx: CommandContext, fallback: LogFormat): LogFormat {
  const v = str(ctx.options, 'log');
  if (v === undefined) return fallback;
  if (!(LOG_FORMATS as readonly string[]).includes(v)) throw new InvalidArgumentError(`--log must be one of ${LOG_FORMATS.join(', ')}, got "${v}".`);
  return v as LogFormat;
}
