/**
 * @module api/start-keys
 * The start options that name a task or tie it to the tasks already holding a key: `title`,
 * `debounce` and `singleton` (`engine.start(wf, input, options)`), with their checks. Each bad
 * value is an InvalidArgumentError naming the option.
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkKey, checkText } from '../text-rules.ts';

/** The longest task title, in UTF-16 code units. */
export const TITLE_MAX = 200;

/**
 * Collapse the starts of one workflow and key made within `period` of each other into one task,
 * which runs with the last start's input once `period` has passed without another start
 * (trailing edge). A start made once the task has been claimed by a worker starts a new task.
 * @example { key: `reindex:${userId}`, period: '30s', maxWait: '5m' }
 */
export interface DebounceOptions {
  /** Starts of the same workflow with the same key are collapsed (1-255 characters). */
  key: string;
  /** How long after the last start the task becomes due. */
  period: Duration;
  /**
   * The task becomes due at most this long after the first start of the burst, however many
   * starts keep coming (a steady stream still runs). At least `period`. @defaultValue no bound
   */
  maxWait?: Duration;
}

/**
 * At most one live (not ended) task of the workflow per key: a second start while one runs is
 * refused (`mode: 'refuse'`, SingletonRunningError, SINGLETON_RUNNING) or answered with the live
 * task (`mode: 'join'`, `created: false`). A key is free again once its task succeeds, fails or
 * is cancelled.
 */
export interface SingletonOptions {
  /** 1-255 characters. */
  key: string;
  /** @defaultValue 'refuse' */
  mode?: 'refuse' | 'join';
}

/** Checks a task title (`engine.start(…, { title })`, or what a workflow's `title(input)` returned). */
export function checkTitle(title: unknown, what: string): string {
  if (typeof title !== 'string') throw new InvalidArgumentError(`${what} must be a string, got ${title === null ? 'null' : typeof title}.`);
  if (!title.trim() || title.length > TITLE_MAX) {
    throw new InvalidArgumentError(`${what} must be 1-${TITLE_MAX} characters and not only spaces, got ${title.length} characters.`);
  }
  return checkText(title, what);
}

/** A debounce option as milliseconds. */
export interface ResolvedDebounce {
  key: string;
  periodMs: number;
  maxWaitMs: number | null;
}

const DEBOUNCE_KEYS = ['key', 'period', 'maxWait'];
const SINGLETON_KEYS = ['key', 'mode'];

function unknownKeys(value: object, known: readonly string[], what: string): void {
  const extra = Object.keys(value).filter((k) => !known.includes(k));
  if (extra.length) throw new InvalidArgumentError(`${what}: unknown option${extra.length > 1 ? 's' : ''} ${extra.map((k) => `"${k}"`).join(', ')} (known: ${known.join(', ')}).`);
}

export function resolveDebounce(d: unknown): ResolvedDebounce {
  if (typeof d !== 'object' || d === null || Array.isArray(d)) throw new InvalidArgumentError('The debounce option must be an object { key, period, maxWait? }.');
  unknownKeys(d, DEBOUNCE_KEYS, 'The debounce option');
  const o = d as DebounceOptions;
  const key = checkKey(o.key, 'debounce.key');
  if (o.period === undefined) throw new InvalidArgumentError('debounce.period is required (how long after the last start the task becomes due, e.g. "30s").');
  const periodMs = toMs(o.period, 'debounce.period');
  if (periodMs <= 0) throw new InvalidArgumentError('debounce.period must be longer than 0.');
  let maxWaitMs: number | null = null;
  if (o.maxWait !== undefined) {
    maxWaitMs = toMs(o.maxWait, 'debounce.maxWait');
    if (maxWaitMs < periodMs) throw new InvalidArgumentError(`debounce.maxWait (${maxWaitMs} ms) must be at least debounce.period (${periodMs} ms).`);
  }
  return { key, periodMs, maxWaitMs };
}

export function resolveSingleton(s: unknown): Required<SingletonOptions> {
  if (typeof s === 'string') return { key: checkKey(s, 'singleton'), mode: 'refuse' };
  if (typeof s !== 'object' || s === null || Array.isArray(s)) throw new InvalidArgumentError("The singleton option must be a key (string) or { key, mode?: 'refuse' | 'join' }.");
  unknownKeys(s, SINGLETON_KEYS, 'The singleton option');
  const o = s as SingletonOptions;
  const key = checkKey(o.key, 'singleton.key');
  const mode = o.mode ?? 'refuse';
  if (mode !== 'refuse' && mode !== 'join') throw new InvalidArgumentError(`singleton.mode must be 'refuse' or 'join', got ${JSON.stringify(mode)}.`);
  return { key, mode };
}

/**
 * A new task's title: the start's `title` option, else what the workflow's `title(input)` returns
 * for the checked input, else null. Either is checked ({@link checkTitle}).
 */
export function taskTitle(given: unknown, fromInput: ((input: never) => unknown) | undefined, input: unknown, workflow: string): string | null {
  if (given !== undefined) return checkTitle(given, 'The title option');
  if (!fromInput) return null;
  let title: unknown;
  try {
    title = (fromInput as (input: unknown) => unknown)(input);
  } catch (e) {
    throw new InvalidArgumentError(`workflow("${workflow}"): its title(input) threw: ${(e as Error)?.message ?? String(e)}`, { cause: e });
  }
  return checkTitle(title, `workflow("${workflow}"): what title(input) returned`);
}
