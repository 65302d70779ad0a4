/**
 * @module failure/classify
 * Which failures are worth another attempt, decided by the engine: every failed attempt is
 * classified once, the class decides whether the step is retried (and after how long), and the
 * class is stored with the attempt's error so that `show`, `engine.get()` and the event log say
 * why a step was or was not retried.
 *
 * The default classifier recognises the shapes real clients throw:
 * - an explicit `retryable: boolean` (Stepwise's RetryableError / NonRetryableError, any error that says so);
 * - the AI SDK's `APICallError` (`isRetryable`, `statusCode`, `responseHeaders`) and its `RetryError`
 *   (classified by its `lastError`);
 * - the `openai` client's `APIError` (`status`, `headers` as a `Headers` object), its connection
 *   and timeout errors (no status: a network failure);
 * - `fetch`: a thrown `Response`, an error carrying a `response` or `status`/`statusCode`, the
 *   `TypeError('fetch failed')` of a network failure (its `cause.code` such as ECONNRESET), and
 *   the `TimeoutError` of `AbortSignal.timeout()`.
 * HTTP statuses: 408, 409, 425, 429 and 5xx are transient; other 4xx (400, 401, 403, 404, 422, …)
 * are permanent. A `Retry-After` (seconds or an HTTP date) or `retry-after-ms` header gives the
 * delay before the next attempt. An error of no known shape is retried (the historic default).
 */
import { InvalidArgumentError } from '../errors.ts';
import type { Classifier } from '../api/step.ts';
import type { ErrorClass } from '../serialize.ts';

export type { ClassifyResult, Classifier } from '../api/step.ts';
export type { ErrorClass, FailureKind } from '../serialize.ts';
export { classOf, rememberClass } from '../serialize.ts';

const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** Whether an HTTP status is worth another attempt. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

type Rec = Record<string, unknown>;
const isObj = (v: unknown): v is Rec => typeof v === 'object' && v !== null;

/** One header of a `Headers` object, a plain record (any case), or undefined. */
function header(headers: unknown, name: string): string | undefined {
  if (!isObj(headers)) return undefined;
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const v = (headers as { get(n: string): unknown }).get(name);
    return typeof v === 'string' ? v : undefined;
  }
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name && typeof v === 'string') return v;
  return undefined;
}

/**
 * The delay a response asks for: `retry-after-ms` (milliseconds), else `Retry-After` as seconds
 * or as an HTTP date (relative to `now`). Undefined when absent or unreadable.
 */
export function retryAfterMsOf(headers: unknown, now: number = Date.now()): number | undefined {
  const ms = header(headers, 'retry-after-ms');
  if (ms !== undefined && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Math.ceil(Number(ms));
  const after = header(headers, 'retry-after');
  if (after === undefined) return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(after)) return Math.ceil(Number(after) * 1000);
  const at = Date.parse(after);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

function fromStatus(status: number, headers: unknown, now: number, via: string): ErrorClass {
  const retryable = isRetryableStatus(status);
  const out: ErrorClass = { kind: retryable ? 'transient' : 'permanent', retryable, reason: `${via}http ${status}`, status };
  const after = retryable ? retryAfterMsOf(headers, now) : undefined;
  if (after !== undefined) out.retryAfterMs = after;
  return out;
}

function statusOf(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 599 ? v : undefined;
}

/** The engine's default class of an error (see the module's description). */
export function classifyDefault(error: unknown, now: number = Date.now(), depth = 0): ErrorClass {
  if (!isObj(error)) return { kind: 'transient', retryable: true, reason: 'unknown error' };
  const e = error;
  const name = typeof e.name === 'string' ? e.name : '';
  // Errors that ask for a repair (an invalid output) carry their own kind.
  if (e.failureKind === 'repair') return { kind: 'repair', retryable: true, reason: typeof e.code === 'string' ? e.code : 'repair' };
  // The AI SDK gave up after its own retries: what matters is the last error it saw.
  if (name === 'AI_RetryError' && isObj(e.lastError) && depth < 3) return classifyDefault(e.lastError, now, depth + 1);
  // The AI SDK's APICallError decides for itself.
  if (typeof e.isRetryable === 'boolean') {
    const status = statusOf(e.statusCode);
    const out: ErrorClass = { kind: e.isRetryable ? 'transient' : 'permanent', retryable: e.isRetryable, reason: `isRetryable: ${e.isRetryable}${status ? ` (http ${status})` : ''}` };
    if (status) out.status = status;
    const after = e.isRetryable ? retryAfterMsOf(e.responseHeaders, now) : undefined;
    if (after !== undefined) out.retryAfterMs = after;
    return out;
  }
  // Anything that says so itself (RetryableError, NonRetryableError, a StepwiseError).
  if (typeof e.retryable === 'boolean') {
    const out: ErrorClass = { kind: e.retryable ? 'transient' : 'permanent', retryable: e.retryable, reason: `retryable: ${e.retryable}` };
    if (typeof e.retryAfterMs === 'number' && Number.isFinite(e.retryAfterMs) && e.retryAfterMs >= 0) out.retryAfterMs = e.retryAfterMs;
    return out;
  }
  // A thrown fetch Response, the openai client's APIError (status + Headers), an error with a response.
  const status = statusOf(e.status) ?? statusOf(e.statusCode);
  if (status !== undefined) return fromStatus(status, e.headers ?? e.responseHeaders ?? (isObj(e.response) ? e.response.headers : undefined), now, '');
  if (isObj(e.response)) {
    const s = statusOf(e.response.status) ?? statusOf(e.response.statusCode);
    if (s !== undefined) return fromStatus(s, e.response.headers, now, '');
  }
  // Network failures: openai's connection errors, fetch's TypeError('fetch failed') with a cause code, timeouts.
  if (name === 'APIConnectionError' || name === 'APIConnectionTimeoutError') return { kind: 'transient', retryable: true, reason: `network (${name})` };
  if (name === 'TimeoutError') return { kind: 'transient', retryable: true, reason: 'timeout' };
  const code = typeof e.code === 'string' ? e.code : isObj(e.cause) && typeof e.cause.code === 'string' ? e.cause.code : undefined;
  if (code && NETWORK_CODES.has(code)) return { kind: 'transient', retryable: true, reason: `network ${code}` };
  if (name === 'TypeError' && e.message === 'fetch failed') return { kind: 'transient', retryable: true, reason: 'network (fetch failed)' };
  // An error wrapping one of the shapes above (a library that rethrows with `cause`).
  if (isObj(e.cause) && depth < 3) {
    const inner = classifyDefault(e.cause, now, depth + 1);
    if (inner.reason !== 'unknown error') return { ...inner, reason: `cause: ${inner.reason}` };
  }
  return { kind: 'transient', retryable: true, reason: 'unknown error' };
}

/**
 * The class of an attempt's error: the step's `classify` hook first (when it answers), else the
 * default. An explicit `NonRetryableError` (code NON_RETRYABLE) stays permanent whatever the hook says.
 */
export function classifyError(error: unknown, hook: Classifier | undefined, now: number = Date.now()): ErrorClass {
  const base = classifyDefault(error, now);
  if (!hook || (isObj(error) && error.code === 'NON_RETRYABLE')) return base;
  const answer = hook(error);
  if (answer === undefined || answer === null) return base;
  const kind = typeof answer === 'string' ? answer : answer.kind;
  if (kind !== 'transient' && kind !== 'permanent' && kind !== 'repair') {
    throw new InvalidArgumentError(`classify() returned ${JSON.stringify(answer)}: return 'transient', 'permanent', 'repair', { kind, retryAfterMs? } or undefined`);
  }
  const out: ErrorClass = { kind, retryable: kind !== 'permanent', reason: typeof answer === 'object' && answer.reason ? answer.reason : 'classify hook' };
  if (base.status !== undefined) out.status = base.status;
  const after = typeof answer === 'object' ? answer.retryAfterMs : undefined;
  if (typeof after === 'number' && Number.isFinite(after) && after >= 0) out.retryAfterMs = after;
  else if (out.retryable && base.retryAfterMs !== undefined) out.retryAfterMs = base.retryAfterMs;
  return out;
}
