/**
 * @module server/routes/events
 * The event log as Server-Sent Events. `GET /api/tasks/:id/events` streams one task's log, each
 * entry an SSE message with `id: <seq>`, `event: <type>` and the entry as JSON: a client that
 * reconnects sends `Last-Event-ID` (browsers do so by themselves) and continues after that entry,
 * missing nothing and seeing nothing twice. The stream ends with an `end` message once the task
 * has succeeded or been cancelled. `GET /api/events` streams every task's entries (from now, or
 * after the cursor in `Last-Event-ID`) for live lists. Both read through `engine.events()`.
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
const AllEventsQuery = z.object({ after: Cursor.optional().describe('resume after this cursor (Last-Event-ID wins)') }).strict();

export interface StreamRoute {
  path: string;
  handle(c: Context<Env>): Promise<Response>;
}

export function eventRoutes(engine: Engine, keepAliveMs: number): { specs: RouteSpec[]; mount: StreamRoute[] } {
  const stream = (
    c: Context<Env>,
    events: (signal: AbortSignal) => AsyncIterable<{ seq: number; type: string; cursor?: string }>,
    idOf: (e: { seq: number; cursor?: string }) => string,
    endOnFinish: boolean,
  ): Response =>
    streamSSE(c, async (sse) => {
      const abort = new AbortController();
      sse.onAbort(() => abort.abort());
      const keepAlive = setInterval(() => void sse.write(': keep-alive\n\n').catch(() => abort.abort()), keepAliveMs);
      try {
        await sse.writeSSE({ event: 'ready', data: '{}', retry: 1000 });
        for await (const e of events(abort.signal)) {
          await sse.writeSSE({ id: idOf(e), event: e.type, data: JSON.stringify(e) });
        }
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
          return stream(
            c,
            (signal) => engine.events({ taskId: id, after, signal }),
            (e) => String(e.seq),
            true,
          );
        },
      },
      {
        path: '/api/events',
        async handle(c) {
          const query = validate(AllEventsQuery, c.req.query(), 'query');
          const last = c.req.header('last-event-id');
          const after = last !== undefined && last !== '' ? validate(Cursor, last, 'Last-Event-ID header') : (query.after ?? 'now');
          return stream(
            c,
            (signal) => engine.events({ after, signal }),
            (e) => e.cursor ?? String(e.seq),
            false,
          );
        },
      },
    ],
  };
}
