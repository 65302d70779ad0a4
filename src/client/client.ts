/**
 * @module client/client
 * Internal: not part of the public API (the package exports only its index modules).
 * `StepwiseClient`: a small client of Stepwise's HTTP API for browsers (and any runtime
 * with `fetch`): start tasks, read them, signal, cancel and decide approvals, and follow a task's
 * tokens and log as they come. It has no dependency and imports nothing of the engine, so a
 * bundler ships only this file's code to the page.
 *
 * A stream ({@link StepwiseClient.stream}) reconnects by itself when the connection drops (a
 * network blip, a server restart): it sends the id of the last message it handed out as
 * `Last-Event-ID`, so nothing is missed and nothing comes twice, and it ends when the task has
 * ended (or when its `signal` aborts).
 * @example
 * import { StepwiseClient } from 'stepwise-engine/client';
 * const client = new StepwiseClient({ baseUrl: '/', token: sessionToken });
 * const { id } = await client.start('research', { question });
 * for await (const e of client.stream(id)) if (e.type === 'stream:delta') output.textContent += e.delta;
 */
import { refuseUnknownOptions } from './options.ts';
import { readSse } from './sse.ts';

export type { SseMessage } from './sse.ts';

export interface ClientOptions {
  /** Where the server is (`https://agents.example.com`, or `/` on the server's own pages). @defaultValue the page's origin */
  baseUrl?: string;
  /** A token of `STEPWISE_TOKENS`, sent as `Authorization: Bearer`; without it the browser's session cookie of the dashboard is used. */
  token?: string;
  /** The fetch to use. @defaultValue globalThis.fetch */
  fetch?: typeof fetch;
  /** First delay before a dropped stream reconnects (doubled up to 10 s; the server's `retry:` wins). @defaultValue 1000 */
  reconnectMs?: number;
}

/** A frame of a streaming step: text it streamed, or a reset when a retried attempt starts over (drop what the step showed). */
export interface StreamFrame {
  type: 'stream:delta' | 'stream:reset';
  taskId: string;
  step: string;
  attempt: number;
  seq: number;
  delta: string;
  at: number;
}

/** An entry of the task's log (with `log: true`): `type` names it, as in `engine.events()`. */
export interface LogEntry {
  type: string;
  seq: number;
  at: number;
  [field: string]: unknown;
}

export interface StreamOptions {
  /** Also the task's log entries, in order with the frames. @defaultValue false */
  log?: boolean;
  /** Resume after this message id (the `id` of the last item seen). @defaultValue from the start */
  after?: string;
  /** Stops the stream (the iteration ends without an error). */
  signal?: AbortSignal;
}

/** An item of a task's stream: a frame or a log entry, with the id to resume after it. */
export type StreamItem = (StreamFrame | LogEntry) & { id: string };

/** An error answer of the server: `code` is Stepwise's stable error code (`TASK_NOT_FOUND`, `INVALID_ARGUMENT`, …). */
export class StepwiseHttpError extends Error {
  readonly status: number;
  readonly code: string;
  /** The whole `error` object of the answer (extra fields such as `legalEvents`). */
  readonly details: Record<string, unknown>;
  constructor(status: number, details: Record<string, unknown>) {
    super(typeof details.message === 'string' ? details.message : `HTTP ${status}`);
    this.name = 'StepwiseHttpError';
    this.status = status;
    this.code = typeof details.code === 'string' ? details.code : `HTTP_${status}`;
    this.details = details;
  }
}

const MAX_RECONNECT_MS = 10_000;

/** A client of one Stepwise server. */
export class StepwiseClient {
  readonly #base: string;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #reconnectMs: number;

  constructor(options: ClientOptions = {}) {
    refuseUnknownOptions(options, ['baseUrl', 'token', 'fetch', 'reconnectMs'], 'new StepwiseClient()');
    const base = options.baseUrl ?? (globalThis as { location?: { origin?: string } }).location?.origin;
    if (!base) throw new TypeError('StepwiseClient: baseUrl is required outside a browser page.');
    this.#base = base.replace(/\/+$/, '');
    this.#token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('StepwiseClient: no fetch in this runtime; pass options.fetch.');
    this.#fetch = f.bind(globalThis);
    this.#reconnectMs = options.reconnectMs ?? 1000;
  }

  /** Starts a task (`POST /api/tasks`); the same `idempotencyKey` returns the first task. */
  start(workflow: string, input?: unknown, options: { idempotencyKey?: string; delayMs?: number } = {}): Promise<{ id: string; status: string; created: boolean; [field: string]: unknown }> {
    return this.#json('POST', '/api/tasks', { workflow, ...(input === undefined ? {} : { input }), ...options });
  }

  /** The task with its steps and log (`GET /api/tasks/:id`). */
  get(id: string): Promise<{ id: string; status: string; [field: string]: unknown }> {
    return this.#json('GET', `/api/tasks/${encodeURIComponent(id)}`);
  }

  /** Sends a signal (`POST /api/tasks/:id/signals/:name`). */
  signal(id: string, name: string, payload?: unknown, options: { idempotencyKey?: string } = {}): Promise<{ created: boolean; delivered: string; status: string }> {
    return this.#json('POST', `/api/tasks/${encodeURIComponent(id)}/signals/${encodeURIComponent(name)}`, { ...(payload === undefined ? {} : { payload }), ...options });
  }

  /** Cancels the task (its running step's model stream is closed). */
  cancel(id: string, options: { reason?: string } = {}): Promise<{ id: string; status: string }> {
    return this.#json('POST', `/api/tasks/${encodeURIComponent(id)}/cancel`, options);
  }

  /** Decides an approval as the token's identity. */
  decide(approvalId: string, decision: { approve: boolean; comment?: string; data?: unknown }): Promise<Record<string, unknown>> {
    return this.#json('POST', `/api/approvals/${encodeURIComponent(approvalId)}/decide`, decision);
  }

  /**
   * The task's frames (and log entries with `log: true`) as they come, from `GET /api/tasks/:id/stream`.
   * Reconnects after a dropped connection where it left off; ends when the task has ended.
   */
  async *stream(id: string, options: StreamOptions = {}): AsyncGenerator<StreamItem> {
    refuseUnknownOptions(options, ['log', 'after', 'signal'], 'client.stream()');
    let last = options.after;
    let delay = this.#reconnectMs;
    const path = `/api/tasks/${encodeURIComponent(id)}/stream${options.log ? '?log=true' : ''}`;
    for (;;) {
      if (options.signal?.aborted) return;
      let res: Response;
      try {
        res = await this.#fetch(this.#base + path, {
          headers: this.#headers(last === undefined ? {} : { 'last-event-id': last }),
          ...(options.signal ? { signal: options.signal } : {}),
          credentials: 'same-origin',
        });
      } catch {
        if (options.signal?.aborted) return;
        await pause(delay, options.signal);
        delay = Math.min(delay * 2, MAX_RECONNECT_MS);
        continue;
      }
      if (res.status >= 500) {
        // A server restarting or a proxy without it: try again, as an EventSource would.
        await res.body?.cancel().catch(() => undefined);
        await pause(delay, options.signal);
        delay = Math.min(delay * 2, MAX_RECONNECT_MS);
        continue;
      }
      if (!res.ok) throw await errorOf(res);
      try {
        for await (const m of readSse(res.body as ReadableStream<Uint8Array>)) {
          if (m.retry !== undefined) delay = m.retry;
          if (m.event === 'end') return;
          if (m.id === undefined) continue; // `ready` and other messages with no place in the stream
          last = m.id;
          delay = m.retry ?? this.#reconnectMs;
          yield { ...(JSON.parse(m.data) as StreamFrame | LogEntry), id: m.id };
        }
      } catch (e) {
        if (options.signal?.aborted) return;
        if (e instanceof SyntaxError) throw e;
      }
      // The connection ended without `end`: the server went away. Come back after the last id.
      await pause(delay, options.signal);
      delay = Math.min(delay * 2, MAX_RECONNECT_MS);
    }
  }

  #headers(extra: Record<string, string> = {}): Record<string, string> {
    // The CSRF header lets a cookie session (the dashboard's) post; a bearer token needs none.
    return { accept: 'application/json', 'x-stepwise-csrf': '1', ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}), ...extra };
  }

  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.#fetch(this.#base + path, {
      method,
      headers: this.#headers(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      credentials: 'same-origin',
    });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  }
}

async function errorOf(res: Response): Promise<StepwiseHttpError> {
  const body = (await res.json().catch(() => null)) as { error?: Record<string, unknown> } | null;
  return new StepwiseHttpError(res.status, body?.error ?? { message: `HTTP ${res.status} ${res.statusText}` });
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
