/**
 * @module serialize
 * What goes into the store is JSON text. This module refuses values that JSON would silently
 * change (a Date becomes a string, a Map becomes `{}`, NaN becomes null, a class instance loses its
 * prototype) so that a replayed step returns exactly what the first run returned; and it turns
 * errors into JSON and back, keeping `name`, `message`, `code`, `stack`, `retryable` and `cause`.
 */
import { ERROR_CODES, NotSerializableError, StepwiseError, coerceError, type ErrorCode } from './errors.ts';

/** Why an attempt failed, as far as retrying is concerned. */
export type FailureKind =
  /** Worth another attempt as it is (a network failure, a 5xx, a 429, a timeout). */
  | 'transient'
  /** Another identical attempt cannot succeed (a 400, a 401, a NonRetryableError). */
  | 'permanent'
  /** The step's output was wrong (a business error): another attempt may fix it given the error (see `repair`). */
  | 'repair';

/** The class of one failed attempt, stored with its error. */
export interface ErrorClass {
  kind: FailureKind;
  /** Whether the retry policy may attempt the step again (`kind !== 'permanent'`). */
  retryable: boolean;
  /** What told the classifier: `http 429`, `network ECONNRESET`, `retryable: false`, `classify hook`, … */
  reason: string;
  /** The HTTP status, when the error came from an HTTP response. */
  status?: number;
  /** The delay the server asked for (Retry-After), in ms: replaces the computed backoff. */
  retryAfterMs?: number;
  /** Repair attempts the step had used when this attempt failed (kept across resumes). */
  repairsUsed?: number;
  /** Attempts made before a person's `retry` decision (`onExhausted: 'ask'`): not held against the retry policy. */
  retriedAfter?: number;
}

/**
 * The class recorded for each classified error object, so that every serialisation of it (the
 * attempt's journal row, the task's error where it is a cause) stores the class with it.
 */
const CLASSES = new WeakMap<object, ErrorClass>();

export function rememberClass(error: object, cls: ErrorClass): void {
  CLASSES.set(error, cls);
}

export function classOf(error: unknown): ErrorClass | undefined {
  return typeof error === 'object' && error !== null ? CLASSES.get(error) : undefined;
}

/**
 * JSON text for `value`, or `null` for `undefined`. Throws {@link NotSerializableError} naming
 * `what` (built only then) and the path of the first offending value.
 */
export function encodeJson(value: unknown, what: string | (() => string)): string | null {
  if (value === undefined) return null;
  if (value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) {
    return JSON.stringify(value);
  }
  // A quick walk first; paths are built only to explain a refusal.
  if (!isPlainJson(value, new Set())) checkJson(value, typeof what === 'string' ? what : what(), 'the value', new Set());
  return JSON.stringify(value);
}

/** Whether JSON round-trips `value` exactly (no path bookkeeping: the common case is yes). */
function isPlainJson(value: unknown, seen: Set<object>): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object':
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (seen.has(value)) return false;
  seen.add(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined || !isPlainJson(item, seen)) return false;
    }
  } else {
    const proto: unknown = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return false;
    for (const key in value) {
      if (Object.hasOwn(value, key) && !isPlainJson((value as Record<string, unknown>)[key], seen)) return false;
    }
  }
  seen.delete(value);
  return true;
}

export function decodeJson(text: string | null): unknown {
  return text === null ? undefined : JSON.parse(text);
}

function checkJson(value: unknown, what: string, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new NotSerializableError(what, path, `is ${value}`);
      return;
    case 'undefined':
      return; // dropped from objects, like JSON.stringify; top-level undefined is stored as NULL
    case 'bigint':
      throw new NotSerializableError(what, path, 'is a bigint (convert it to a string)');
    case 'function':
      throw new NotSerializableError(what, path, 'is a function');
    case 'symbol':
      throw new NotSerializableError(what, path, 'is a symbol');
  }
  if (value === null) return;
  const obj = value as object;
  if (seen.has(obj)) throw new NotSerializableError(what, path, 'refers back to itself (a cycle)');
  seen.add(obj);
  if (Array.isArray(obj)) {
    for (let i = 0; i < obj.length; i++) {
      const item: unknown = obj[i];
      if (item === undefined) throw new NotSerializableError(what, `${path}[${i}]`, 'is undefined (JSON turns it into null)');
      checkJson(item, what, `${path}[${i}]`, seen);
    }
  } else {
    const proto: unknown = Object.getPrototypeOf(obj);
    if (proto !== Object.prototype && proto !== null) {
      const kind = (obj.constructor as { name?: string } | undefined)?.name || 'object';
      const hint = obj instanceof Date ? ' (use date.toISOString())' : obj instanceof Map || obj instanceof Set ? ' (use an array or a plain object)' : '';
      throw new NotSerializableError(what, path, `is a ${kind}${hint}`);
    }
    for (const [k, v] of Object.entries(obj)) checkJson(v, what, /^[A-Za-z_$][\w$]*$/.test(k) ? `${path}.${k}` : `${path}[${JSON.stringify(k)}]`, seen);
  }
  seen.delete(obj);
}

/** The JSON form of an error as stored in the task row and the journal. */
export interface SerializedError {
  name: string;
  message: string;
  code?: string;
  stack?: string;
  retryable?: boolean;
  retryAfterMs?: number;
  /**
   * How the engine classified the error when a step attempt failed with it: its kind
   * (`transient`, `permanent`, `repair`), what told the classifier, the HTTP status, Retry-After.
   */
  class?: ErrorClass;
  /** Extra own enumerable fields of the error that were JSON data (`status`, `stepName`, …). */
  data?: Record<string, unknown>;
  cause?: SerializedError;
}

const SKIP_FIELDS = new Set(['name', 'message', 'code', 'stack', 'retryable', 'retryAfterMs', 'cause', 'failureKind']);

/**
 * tsx runs a CommonJS-format TypeScript module (a `.ts` file of a project without
 * `"type": "module"`) from a `data:` URL that holds the module's whole compiled source, so each
 * stack frame in it would store that source again, URL-encoded. Such a frame names the file (from
 * the URL's `filePath`) instead; its line and column stay those of the compiled code.
 */
const DATA_URL_FRAME = /data:text\/javascript,[^?\s]*\?filePath=([^\s:]+?)(?:%3Fnamespace%3D[^\s:]*)?(?=:\d+:\d+)/g;

function readableStack(stack: string): string {
  if (!stack.includes('data:text/javascript,')) return stack;
  return stack.replace(DATA_URL_FRAME, (frame, path: string) => {
    try {
      return decodeURIComponent(path);
    } catch {
      return frame;
    }
  });
}

export function serializeError(e: unknown, depth = 0): SerializedError {
  const err = coerceError(e);
  const out: SerializedError = { name: err.name || 'Error', message: err.message };
  const anyErr = err as Error & { code?: unknown; retryable?: unknown; retryAfterMs?: unknown };
  if (typeof anyErr.code === 'string') out.code = anyErr.code;
  if (typeof err.stack === 'string') out.stack = readableStack(err.stack);
  if (typeof anyErr.retryable === 'boolean') out.retryable = anyErr.retryable;
  if (typeof anyErr.retryAfterMs === 'number') out.retryAfterMs = anyErr.retryAfterMs;
  const cls = classOf(err);
  if (cls) {
    out.class = cls;
    out.retryable ??= cls.retryable;
    if (cls.retryAfterMs !== undefined) out.retryAfterMs ??= cls.retryAfterMs;
  }
  const data: Record<string, unknown> = {};
  const repair = (err as { failureKind?: unknown }).failureKind === 'repair';
  for (const [k, v] of Object.entries(err)) {
    if (SKIP_FIELDS.has(k)) continue;
    if (v === null || ['string', 'number', 'boolean'].includes(typeof v)) data[k] = v;
    // A repair error keeps its wrong output and its issues: the next attempt (maybe in another
    // process) receives them as `lastOutput` and `lastError.issues`.
    else if (repair && (k === 'output' || k === 'issues') && v !== undefined && isPlainJson(v, new Set())) data[k] = v;
  }
  if (repair) data.failureKind = 'repair';
  if (Object.keys(data).length) out.data = data;
  if (err.cause !== undefined && depth < 5) out.cause = serializeError(err.cause, depth + 1);
  return out;
}

/**
 * An error rebuilt from its JSON form. It is a {@link StepwiseError} when the code is one of ours
 * (so `isStepwiseError` and `.code` work), otherwise a plain `Error` with the original `name`.
 */
export function deserializeError(s: SerializedError): Error {
  const cause = s.cause ? deserializeError(s.cause) : undefined;
  const known = s.code !== undefined && (Object.values(ERROR_CODES) as string[]).includes(s.code);
  let err: Error;
  if (known) {
    err = new StepwiseError(s.code as ErrorCode, s.message, { cause, retryable: s.retryable ?? false });
  } else {
    err = new Error(s.message, cause === undefined ? undefined : { cause });
    if (s.code !== undefined) (err as Error & { code?: string }).code = s.code;
    if (s.retryable !== undefined) (err as Error & { retryable?: boolean }).retryable = s.retryable;
  }
  err.name = s.name;
  if (s.retryAfterMs !== undefined) (err as Error & { retryAfterMs?: number }).retryAfterMs = s.retryAfterMs;
  if (s.stack !== undefined) err.stack = s.stack;
  if (s.data) Object.assign(err, s.data);
  if (s.class) rememberClass(err, s.class);
  return err;
}

export function encodeError(e: unknown): string {
  return JSON.stringify(serializeError(e));
}

export function decodeError(text: string): SerializedError {
  return JSON.parse(text) as SerializedError;
}
