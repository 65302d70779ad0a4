/**
 * @module server/routes/events
 * The event log as Server-Sent Events. `GET /api/tasks/:id/events` streams one task's log, each
 * entry an SSE message with `id: <seq>`, `event: <type>` and the entry as JSON: a client that
 * reconnects sends `Last-Event-ID` (browsers do so by themselves) and continues after that entry,
 * missing nothing and seeing nothing twice. The stream ends with an `end` message once the task
 * has succeeded or been cancelled. `GET /api/events` streams every task's entries (from now, or
 * after the cursor in `Last-Event-ID`) for live lists. `GET /api/tasks/:id/stream` carries a task's
 * stream frames (the tokens of its streaming model steps, and the reset frame of a retried
 * attempt), with its log entries when asked (`?log=true`), each message's id the pair of cursors
 * `<log seq>.<frame seq>`. All read through `engine.events()`.
 */
import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import type { Engine } from '../../index.ts';
import type { Env } from '../middleware.ts';
import { TaskId, validate } from '../schemas.ts';
import type { RouteSpec } from './route.ts';

const Seq = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Cursor = z.string().regex(/^[\x21-\x7e]{1,2000}$/, 'a cursor from an earlier event');
const TaskEventsQuery = z.object({ after: Seq.optional().describe('resume after this seq (Last-Event-ID wins)') }).strict();
const StreamCursor = z.string().regex(/^\d{1,15}\.\d{1,15}$/, 'the id of an earlier message (<log seq>.<frame seq>)');
const StreamQuery = z
  .object({
    log: z.enum(['true', 'false']).optional().describe('also carry the log entries (default false)'),
    after: StreamCursor.optional().describe('resume after this message id (Last-Event-ID wins)'),
  })
  .strict();
const AllEventsQuery = z.object({ after: Cursor.optional().describe('resume after this cursor (Last-Event-ID wins)') }).strict();

export interface StreamRoute {
  path: string;
  handle(c: Context<Env>): Promise<Response>;
}

export function eventRoutes(engine: Engine, keepAliveMs: number): { specs: RouteSpec[]; mount: StreamRoute[] } {
  const stream = (c: Context<Env>, messages: (signal: AbortSignal) => AsyncIterable<SseMessage | null>, endOnFinish: boolean): Response =>
    streamSSE(c, async (sse) => {
      const abort = new AbortController();
      sse.onAbort(() => abort.abort());
      const keepAlive = setInterval(() => void sse.write(': keep-alive\n\n').catch(() => abort.abort()), keepAliveMs);
      try {
        await sse.writeSSE({ event: 'ready', data: '{}', retry: 1000 });
        for await (const m of messages(abort.signal)) if (m) await sse.writeSSE(m);
        if (endOnFinish && !abort.signal.aborted) await sse.writeSSE({ event: 'end', data: '{}' });
      } finally {
        clearInterval(keepAlive);
      }
    });

  const spec = (path: string, summary: string, query: z.ZodType): RouteSpec => ({
    method: 'get',
    path,
    summary,
    permission: 'read',
    query,
    responses: { 200: 'text/event-stream of log entries', 404: 'unknown id' },
    handle: () => Promise.reject(new Error('streamed')),
  });

  return {
    specs: [
      { ...spec('/api/tasks/:id/events', "A task's event log as Server-Sent Events, resumable with Last-Event-ID", TaskEventsQuery), params: { id: TaskId } },
      spec('/api/events', "Every task's new log entries as Server-Sent Events (for live lists)", AllEventsQuery),
      {
        ...spec(
          '/api/tasks/:id/stream',
          "A task's stream frames (model tokens as they come), optionally with its log entries, as Server-Sent Events resumable with Last-Event-ID",
          StreamQuery,
        ),
        params: { id: TaskId },
        responses: { 200: 'text/event-stream of stream frames (stream:delta, stream:reset) and, with log=true, log entries', 404: 'unknown id' },
      },
    ],
    mount: [
      {
        path: '/api/tasks/:id/events',
        async handle(c) {
          const id = validate(TaskId, c.req.param('id'), 'path parameter id');
          const query = validate(TaskEventsQuery, c.req.query(), 'query');
          const last = c.req.header('last-event-id');
          const after = last !== undefined && last !== '' ? validate(Seq, last, 'Last-Event-ID header') : (query.after ?? 0);
          await engine.get(id, { steps: false, history: false }); // 404 before the stream starts
          return stream(c, (signal) => each(engine.events({ taskId: id, after, signal }), (e) => ({ id: String(e.seq), event: e.type, data: JSON.stringify(e) })), true);
        },
      },
      {
        path: '/api/events',
        async handle(c) {
          const query = validate(AllEventsQuery, c.req.query(), 'query');
          const last = c.req.header('last-event-id');
          const after = last !== undefined && last !== '' ? validate(Cursor, last, 'Last-Event-ID header') : (query.after ?? 'now');
          return stream(c, (signal) => each(engine.events({ after, signal }), (e) => ({ id: e.cursor ?? String(e.seq), event: e.type, data: JSON.stringify(e) })), false);
        },
      },
      {
        path: '/api/tasks/:id/stream',
        async handle(c) {
          const id = validate(TaskId, c.req.param('id'), 'path parameter id');
          const query = validate(StreamQuery, c.req.query(), 'query');
          const last = c.req.header('last-event-id');
          const from = last !== undefined && last !== '' ? validate(StreamCursor, last, 'Last-Event-ID header') : (query.after ?? '0.0');
          await engine.get(id, { steps: false, history: false }); // 404 before the stream starts
          return stream(c, (signal) => taskStream(engine, id, from, query.log === 'true', signal), true);
        },
      },
    ],
  };
}

/** One SSE message: `id` lets a client resume after it. */
interface SseMessage {
  id: string;
  event: string;
  data: string;
}

async function* each<T>(events: AsyncIterable<T>, message: (e: T) => SseMessage): AsyncGenerator<SseMessage> {
  for await (const e of events) yield message(e);
}

/**
 * A task's frames (and, with `log`, its entries) as SSE messages whose id is the pair of cursors
 * `<log seq>.<frame seq>`: a client that resumes after an id sees every later frame and entry once.
 * Without `log`, entries are read all the same (they tell when the task has ended) but not sent:
 * the ids of the frames carry the log cursor past them.
 */
async function* taskStream(engine: Engine, taskId: string, from: string, log: boolean, signal: AbortSignal): AsyncGenerator<SseMessage | null> {
  const [after, streamAfter] = from.split('.').map(Number) as [number, number];
  let logSeq = after;
  let frameSeq = streamAfter;
  for await (const e of engine.events({ taskId, after, streams: true, streamAfter, signal })) {
    const frame = e.type === 'stream:delta' || e.type === 'stream:reset';
    if (frame) frameSeq = e.seq;
    else logSeq = e.seq;
    yield frame || log ? { id: `${logSeq}.${frameSeq}`, event: e.type, data: JSON.stringify(e) } : null;
  }
}
