/**
 * @module ai/adapters/provider-errors
 * Internal: not part of the public API.
 * Turns a model provider's error into the engine's retry vocabulary. Provider SDKs run with their
 * own retries off (`maxRetries: 0`), so the engine's retry policy is the only one: a 429 becomes a
 * RetryableError that waits what the provider's `Retry-After` (or `retry-after-ms`) says, a
 * timeout, conflict, 5xx or lost connection a RetryableError with the usual backoff, and any other
 * 4xx (a bad request, a bad key) a NonRetryableError — another attempt would fail the same way.
 * Works on the `openai` client's `APIError` (`status`, `headers`) and the AI SDK's `APICallError`
 * (`statusCode`, `responseHeaders`). Aborts pass through unchanged: the engine knows why it aborted.
 */
import { NonRetryableError, RetryableError, isStepwiseError } from '../../errors.ts';

type HeaderBag = Headers | Record<string, string | undefined> | undefined;

function header(headers: HeaderBag, name: string): string | undefined {
  if (!headers) return undefined;
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | undefined>;
  return bag[name] ?? Object.entries(bag).find(([k]) => k.toLowerCase() === name)?.[1];
}

/** The wait a response asks for, in ms: `retry-after-ms`, or `retry-after` in seconds or as an HTTP date. */
export function retryAfterMs(headers: HeaderBag, now = Date.now()): number | undefined {
  const ms = header(headers, 'retry-after-ms');
  if (ms !== undefined && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const after = header(headers, 'retry-after');
  if (after === undefined) return undefined;
  if (/^\d+(\.\d+)?$/.test(after.trim())) return Math.round(Number(after) * 1000);
  const at = Date.parse(after);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The HTTP status and headers of a provider error, if it has them. */
function httpOf(e: unknown): { status: number | undefined; headers: HeaderBag } {
  const x = e as { status?: unknown; statusCode?: unknown; headers?: unknown; responseHeaders?: unknown };
  const status = typeof x.status === 'number' ? x.status : typeof x.statusCode === 'number' ? x.statusCode : undefined;
  const headers = (x.responseHeaders ?? x.headers) as HeaderBag;
  return { status, headers };
}

function isAbort(e: unknown): boolean {
  const name = (e as { name?: unknown })?.name;
  return name === 'AbortError' || name === 'APIUserAbortError' || name === 'TimeoutError';
}

/** Whether the error says the connection failed before any HTTP status (worth another attempt). */
function isConnection(e: unknown): boolean {
  const name = (e as { name?: unknown })?.name;
  return name === 'APIConnectionError' || name === 'APIConnectionTimeoutError' || (e instanceof TypeError && /fetch failed/i.test(e.message));
}

/** `e` as the engine should see it (see the module doc). */
export function classifyProviderError(e: unknown, signal?: AbortSignal): unknown {
  if (signal?.aborted || isAbort(e) || isStepwiseError(e)) return e;
  const message = e instanceof Error ? e.message : String(e);
  const { status, headers } = httpOf(e);
  if (status === 429) {
    const after = retryAfterMs(headers);
    return new RetryableError(`The model provider is rate limiting (429)${after !== undefined ? `; it asks to retry in ${after} ms` : ''}: ${message}`, {
      cause: e,
      ...(after !== undefined ? { retryAfterMs: after } : {}),
    });
  }
  if (status !== undefined && (status === 408 || status === 409 || status >= 500)) {
    const after = retryAfterMs(headers);
    return new RetryableError(`The model provider failed (${status}): ${message}`, { cause: e, ...(after !== undefined ? { retryAfterMs: after } : {}) });
  }
  if (status !== undefined && status >= 400) return new NonRetryableError(`The model provider refused the request (${status}): ${message}`, { cause: e });
  if (isConnection(e)) return new RetryableError(`Could not reach the model provider: ${message}`, { cause: e });
  return e;
}
