/**
 * @module limits
 * Size limits on what a task stores: its input, step and task outputs, and signal payloads. No
 * normal agent task comes near the defaults; they stop a runaway value (a 1 GB input, a transcript
 * that grows without bound) from being written to the database, where it would slow every read of
 * the task and could exhaust the worker's memory on resume. Also the checks of a payload a caller
 * sends: encoded within its limit, and parsed by the schema its workflow declares.
 */
import { InvalidArgumentError, InvalidInputError, PayloadTooLargeError, coerceError } from './errors.ts';
import { encodeJson } from './serialize.ts';

export interface Limits {
  /** Largest task input, as JSON. @defaultValue 256 MiB with the payload store (the default), 16 MiB with `payloads: false` */
  inputBytes?: number;
  /** Largest step output or task output, as JSON. @defaultValue 256 MiB with the payload store (the default), 16 MiB with `payloads: false` */
  outputBytes?: number;
  /** Largest signal payload, as JSON. @defaultValue 64 MiB with the payload store (the default), 1 MiB with `payloads: false` */
  payloadBytes?: number;
  /** Deepest a child task may be in its tree (a task started from outside is at 0). @defaultValue 16 */
  childDepth?: number;
}

export const DEFAULT_LIMITS: Readonly<Required<Limits>> = Object.freeze({
  inputBytes: 16 * 1024 * 1024,
  outputBytes: 16 * 1024 * 1024,
  payloadBytes: 1024 * 1024,
  childDepth: 16,
});

/**
 * The defaults when the payload store keeps large values (`new Engine({ payloads })`, on by
 * default): a value there is stored once, compressed and in parts, so a row never holds it whole.
 */
export const PAYLOAD_STORE_LIMITS: Readonly<Required<Limits>> = Object.freeze({
  inputBytes: 256 * 1024 * 1024,
  outputBytes: 256 * 1024 * 1024,
  payloadBytes: 64 * 1024 * 1024,
  childDepth: 16,
});

/** The limits with defaults filled in; throws on a limit that is not a positive whole number. */
export function resolveLimits(limits: Limits | undefined, check: (name: string, v: unknown) => void, defaults: Readonly<Required<Limits>> = DEFAULT_LIMITS): Required<Limits> {
  const out = { ...defaults, ...(limits ?? {}) };
  for (const [k, v] of Object.entries(out)) check(`limits.${k}`, v);
  return out;
}

/**
 * Throws PayloadTooLargeError if `json` (a JSON text, or null) is over `limit` bytes in UTF-8. A
 * string's byte length is at most three times its length, so most values are not even measured.
 */
export function checkSize(json: string | null, limit: number, what: () => string, option: keyof Limits): void {
  if (json === null || json.length * 3 <= limit) return;
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes > limit) throw new PayloadTooLargeError(what(), bytes, limit, option);
}

/**
 * `value` as stored (JSON text, null for undefined) within `limit` bytes: throws what encodeJson
 * throws for a value JSON cannot hold, or PayloadTooLargeError naming `what` and `option`.
 */
export function encodeWithin(value: unknown, what: string | (() => string), limit: number, option: keyof Limits): string | null {
  const named = typeof what === 'string' ? () => what : what;
  const json = encodeJson(value, named);
  checkSize(json, limit, named, option);
  return json;
}

/** encodeWithin for a value a caller passed in: one JSON cannot hold is an InvalidArgumentError. */
export function encodeArgument(value: unknown, what: string, limit: number, option: keyof Limits): string | null {
  let json: string | null;
  try {
    json = encodeJson(value, what);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message, { cause: e });
  }
  checkSize(json, limit, () => what, option);
  return json;
}

/**
 * Checks what a caller sends to a task (`what`: `signal "x"`, `event "y"`) against the schema its
 * workflow declares, if any: a payload it refuses is an InvalidInputError, and nothing is sent.
 */
export function checkSentPayload(schema: { parse(value: unknown): unknown } | undefined, task: { id: string; workflow: string }, what: string, payload: unknown): void {
  if (!schema) return;
  try {
    schema.parse(payload);
  } catch (e) {
    throw new InvalidInputError(task.workflow, `the payload of ${what} to task ${task.id} fails its schema, and was not sent: ${coerceError(e).message}`, { cause: e });
  }
}
