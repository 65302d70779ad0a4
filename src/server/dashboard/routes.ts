/**
 * @module server/dashboard/routes
 * The dashboard's routes on the server's app: `/` (task list), `/tasks/:id`, `/login`, `/logout`
 * and the two assets. Sign-in (`login.ts`) takes a token and keeps a server-side session's id in
 * an HTTP-only, SameSite=Strict cookie; pages then authenticate like the API does. `?fragment=1` answers only the main section
 * (the script re-renders it on live updates). A page request without a valid session goes to
 * the sign-in page; other errors are shown as a page with the API's message and status.
 */
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { isMachine, machineGraph, type Engine, type TaskStatus, type TaskSummary } from '../../index.ts';
import type { Authenticate, Env } from '../middleware.ts';
import type { SessionTable } from '../sessions.ts';
import { listPage as readListPage, summarizeTask, type SummaryLimits } from '../summaries.ts';
import { can, type TokenTable } from '../auth.ts';
import { errorResponse } from '../http-errors.ts';
import { AlertsQuery, ListQuery, TaskId, validate, WorkflowName } from '../schemas.ts';
import { SCRIPT, STYLE } from './assets.ts';
import { esc, layout } from './html.ts';
import { schedulesPage } from './schedules-page.ts';
import { alertsPage } from './alerts-page.ts';
import { alertsQueryOf } from '../routes/alerts.ts';
import { loginRoutes } from './login.ts';
import { listPage, taskPage, type ListView } from './pages.ts';
import { listFilter } from '../list-filter.ts';

/** A pending task whose run time passed this long ago without a claim is shown as stuck. */
const STUCK_PENDING_MS = 60_000;

const PageQuery = ListQuery.extend({
  view: z.enum(['all', 'mine', 'stuck', 'failed']).optional(),
  fragment: z.literal('1').optional(),
  status: z.union([ListQuery.shape.status, z.literal('')]).optional(),
  workflow: z.union([WorkflowName, z.literal('')]).optional(),
  // An empty field of the filter form means no filter.
  text: z.union([ListQuery.shape.text, z.literal('')]).optional(),
  failedWith: z.union([ListQuery.shape.failedWith, z.literal('')]).optional(),
  createdAfter: z.union([ListQuery.shape.createdAfter, z.literal('')]).optional(),
  createdBefore: z.union([ListQuery.shape.createdBefore, z.literal('')]).optional(),
  /** The task the dashboard just deleted (its page sends the browser here). */
  deleted: TaskId.optional(),
}).strict();

interface DashboardDeps {
  engine: Engine;
  table: TokenTable;
  sessions: SessionTable;
  /** The bounds of the list page (as the API's). */
  summaries: SummaryLimits;
  authenticate: Authenticate;
  limit: number;
}

export function dashboardRoutes(app: Hono<Env>, deps: DashboardDeps): void {
  const { engine } = deps;
  const headers = {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    'x-frame-options': 'DENY',
    'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'",
  };

  /** A page: authenticated (or sent to sign in), rendered whole or as its main section. */
  const page =
    (render: (c: Context<Env>) => Promise<View>) =>
    async (c: Context<Env>): Promise<Response> => {
      try {
        let authed = false;
        await deps.authenticate(c, async () => {
          authed = true;
        });
        if (!authed) return c.redirect('/login');
        const { title, body } = await render(c);
        if (c.req.query('fragment') === '1') return c.body(body, 200, headers);
        return c.body(layout(title, c.get('identity'), body), 200, headers);
      } catch (e) {
        const { status, body } = errorResponse(e);
        if (status === 401) return c.redirect('/login');
        const html = `<section class="error"><h1>${status}</h1><p class="flash error">${esc(body.error.message)}</p><p><a href="/">← Tasks</a></p></section>`;
        return c.body(c.req.query('fragment') === '1' ? html : layout(`Error ${status}`, c.get('identity') ?? null, html), status as 400, headers);
      }
    };

  app.get('/assets/app.js', (c) => c.body(SCRIPT, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'no-cache' }));
  app.get('/assets/app.css', (c) => c.body(STYLE, 200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'no-cache' }));

  loginRoutes(app, { table: deps.table, sessions: deps.sessions, headers });

  app.get(
    '/',
    page((c) => listView(engine, deps.summaries, c)),
  );
  app.get(
    '/tasks/:id',
    page((c) => taskView(engine, c)),
  );
  app.get(
    '/schedules',
    page(async (c) => ({ title: 'Schedules', body: schedulesPage(await engine.schedules.list({ limit: 1000 }), c.get('identity')) })),
  );
  app.get(
    '/alerts',
    page(async (c) => {
      const q = validate(AlertsQuery, c.req.query(), 'filters');
      const limit = 100;
      const list = await engine.alerts(alertsQueryOf(q, limit));
      const filter = { kinds: q.kind ?? null, workflow: q.workflow ?? null, taskId: q.taskId ?? null };
      return { title: 'Alerts', body: alertsPage(list, filter, list.length === limit ? (list.at(-1)?.id ?? null) : null) };
    }),
  );
}

type View = { title: string; body: string };

/** The task list: filtered by status and workflow, or one of the views (mine, stuck, failed). */
async function listView(engine: Engine, limits: SummaryLimits, c: Context<Env>): Promise<View> {
  const q = validate(PageQuery, c.req.query(), 'filters');
  const identity = c.get('identity');
  const view = (q.view ?? 'all') as ListView;
  const status = (Array.isArray(q.status) ? q.status : []) as TaskStatus[];
  const workflow = q.workflow || '';
  // The search fields as typed (kept in the URL, so that a filtered view can be shared).
  const raw = (name: string): string => c.req.query(name) ?? '';
  const search = { tags: raw('tags'), text: raw('text'), failedWith: raw('failedWith'), createdAfter: raw('createdAfter'), createdBefore: raw('createdBefore') };
  const filters = { status, workflow, view, cursor: q.cursor ?? '', ...search };
  let tasks: TaskSummary[] = [];
  let nextCursor: string | null = null;
  let note: string | null = null;
  let bulkFilter: Record<string, unknown> | null = null;
  if (view === 'mine') {
    // Open approvals (pending or escalated) this identity may decide, one row per task.
    const mine = await engine.approvals({ status: ['pending', 'escalated'], approver: identity.name, roles: [identity.role], ...(workflow ? { workflow } : {}), limit: 1000 });
    const ids = [...new Set(mine.map((a) => a.taskId))].slice(0, 200);
    // A few at a time, each summarized at once: the server holds a few tasks' whole values at most.
    for (let i = 0; i < ids.length; i += 10) {
      const got = await Promise.all(ids.slice(i, i + 10).map((id) => engine.get(id, { steps: false, history: false }).catch(() => null)));
      for (const t of got) if (t) tasks.push(summarizeTask(t, limits.valueBytes).item as unknown as TaskSummary);
    }
    if (mine.length >= 1000) note = 'Showing the tasks of the oldest 1000 open approvals you may decide.';
  } else {
    const statuses: TaskStatus[] = view === 'failed' ? ['failed'] : view === 'stuck' ? ['pending', 'running', 'cancelling'] : status;
    const filter = {
      ...(statuses.length ? { status: statuses } : {}),
      ...(workflow ? { workflow } : {}),
      ...(q.cursor ? { cursor: q.cursor } : {}),
      ...listFilter({
        tags: q.tags,
        text: q.text || undefined,
        failedWith: q.failedWith || undefined,
        createdAfter: q.createdAfter || undefined,
        createdBefore: q.createdBefore || undefined,
      }),
    };
    // The bulk bar acts on the whole filter (every page), for an operator, in the views that are filters.
    if ((view === 'all' || view === 'failed') && can(identity, 'operate')) {
      const { cursor: _cursor, ...whole } = filter;
      bulkFilter = whole;
    }
    const res = await readListPage(engine, filter, q.limit ?? 50, limits);
    nextCursor = res.nextCursor;
    tasks = res.tasks as unknown as TaskSummary[];
    if (view === 'stuck') {
      const now = engine.clock.now();
      tasks = tasks.filter(
        (t) =>
          (t.status === 'pending' && t.runAt !== null && t.runAt < now - STUCK_PENDING_MS) ||
          ((t.status === 'running' || t.status === 'cancelling') && (t.lease === null || t.lease.expiresAt < now)),
      );
      note = 'Stuck: running or cancelling with an expired lease, or due for over a minute without a worker (checked page by page).';
    }
  }
  if (q.deleted) note = `Task ${q.deleted} was deleted.${note ? ` ${note}` : ''}`;
  return { title: 'Tasks', body: listPage({ tasks, nextCursor, filters, note, bulkFilter }) };
}

/** One task: its steps, log, approvals, and its state machine's diagram when it is one. */
async function taskView(engine: Engine, c: Context<Env>): Promise<View> {
  const id = validate(TaskId, c.req.param('id'), 'task id');
  const [task, explanation] = await Promise.all([engine.get(id), engine.explain(id)]);
  const definition = engine.workflows.get(task.workflow);
  return {
    title: `Task ${id}`,
    body: taskPage({
      task,
      legalEvents: explanation.legalEvents,
      summary: explanation.summary,
      identity: c.get('identity'),
      now: engine.clock.now(),
      ...(task.machine && isMachine(definition) ? { graph: machineGraph(definition as NonNullable<typeof definition>) } : {}),
    }),
  };
}
