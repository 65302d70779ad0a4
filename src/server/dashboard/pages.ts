/**
 * @module server/dashboard/pages
 * The dashboard's pages, rendered on the server from the public API: the task list (filters,
 * paging) and a task's page (status and what may be done, the step timeline, approvals, the event
 * log, the lifecycle diagram). Buttons are rendered only for what the caller's role allows and
 * the task's status accepts; the API checks both again.
 */
import { ALL_STATUSES, isFinished, type ApprovalInfo, type MachineGraph, type MachineInfo, type TaskEvent, type TaskInfo, type TaskSummary, type UsageTotals } from '../../index.ts';
import { can, type Identity } from '../auth.ts';
import { lifecycleSvg, machineSvg } from './diagram.ts';
import { badge, duration, esc, json, time, tokens, usd } from './html.ts';

export type ListView = 'all' | 'mine' | 'stuck' | 'failed';

export interface ListPageData {
  tasks: TaskSummary[];
  nextCursor: string | null;
  filters: { status: string[]; workflow: string; view: ListView; cursor: string } & SearchFields;
  /** Why the list is partial (stuck computed per page, the oldest open approvals only). */
  note: string | null;
  /** The filter of `POST /api/tasks/bulk` for the bulk bar (an operator's filtered views), or null: no bar. */
  bulkFilter?: Record<string, unknown> | null;
}

const BULK: Array<[string, string]> = [
  ['cancel', 'Cancel'],
  ['retry', 'Retry'],
  ['pause', 'Pause'],
  ['resume', 'Resume'],
];

/** The bulk bar: each action on every task of the filter (the script counts first and asks). */
function bulkBar(filter: Record<string, unknown> | null | undefined): string {
  if (!filter) return '';
  const buttons = BULK.map(([action, label]) => `<button type="button" class="small" data-bulk="${action}">${label} all</button>`).join(' ');
  return `<div class="bulk" data-filter="${esc(JSON.stringify(filter))}">Every task of this filter: ${buttons}</div>`;
}

/** The search fields of the list's filter form, as typed. */
export interface SearchFields {
  tags: string;
  text: string;
  failedWith: string;
  createdAfter: string;
  createdBefore: string;
}

const SEARCH_FIELDS: Array<[keyof SearchFields, string, string]> = [
  ['tags', 'Tags', 'tenant=acme,user=u1'],
  ['text', 'Text', 'in id, title, input, error'],
  ['failedWith', 'Error code', 'e.g. RATE_LIMITED'],
  ['createdAfter', 'Created after', '2026-12-01T09:00Z'],
  ['createdBefore', 'Created before', '2026-12-02'],
];

function query(f: ListPageData['filters'], cursor?: string): string {
  const q = new URLSearchParams();
  if (f.status.length) q.set('status', f.status.join(','));
  if (f.workflow) q.set('workflow', f.workflow);
  for (const [name] of SEARCH_FIELDS) if (f[name]) q.set(name, f[name]);
  if (f.view !== 'all') q.set('view', f.view);
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** A task's tags as small chips, each a link to the tasks with that tag. */
function tagChips(tags: Readonly<Record<string, string>> | undefined): string {
  return Object.entries(tags ?? {})
    .map(([k, v]) => `<a class="tag" href="/?tags=${encodeURIComponent(`${k}=${v}`)}">${esc(k)}=${esc(v)}</a>`)
    .join(' ');
}

function progressOf(t: TaskSummary): string {
  const p = t.progress;
  if (!p) return '';
  const frac = p.total ? ` ${p.done ?? 0}/${p.total}` : p.done !== undefined ? ` ${p.done}` : '';
  return esc(`${p.step ?? ''}${frac}${p.note ? ` — ${p.note}` : ''}`);
}

export function listPage(d: ListPageData): string {
  const f = d.filters;
  const views: Array<[ListView, string]> = [
    ['all', 'All'],
    ['mine', 'Waiting on me'],
    ['stuck', 'Stuck'],
    ['failed', 'Failed'],
  ];
  const rows = d.tasks.map(
    (t) => `<tr data-task="${esc(t.id)}">
<td><a href="/tasks/${esc(t.id)}">${esc(t.id)}</a></td><td class="title">${t.title ? esc(t.title) : ''}</td><td>${esc(t.workflow)}</td><td>${badge(t.status)}${t.pauseRequested ? ' <small>pause requested</small>' : ''}</td><td class="tags">${tagChips(t.tags)}</td>
<td class="progress">${progressOf(t)}</td><td>${time(t.createdAt)}</td><td>${time(t.updatedAt)}</td></tr>`,
  );
  return `<section class="list" data-live="list">
<h1>Tasks</h1>
<nav class="views">${views.map(([v, label]) => `<a href="/${query({ ...f, view: v, cursor: '' })}" class="${f.view === v ? 'active' : ''}" data-view="${v}">${label}</a>`).join(' ')}</nav>
<form class="filters" method="get" action="/">
<input type="hidden" name="view" value="${esc(f.view)}">
<label>Status <select name="status"><option value="">any</option>${ALL_STATUSES.map((s) => `<option value="${s}"${f.status.length === 1 && f.status[0] === s ? ' selected' : ''}>${s}</option>`).join('')}</select></label>
<label>Workflow <input name="workflow" value="${esc(f.workflow)}" placeholder="any"></label>
${SEARCH_FIELDS.map(([name, label, hint]) => `<label>${label} <input name="${name}" value="${esc(f[name])}" placeholder="${esc(hint)}"></label>`).join('\n')}
<button type="submit">Filter</button>
</form>
${bulkBar(d.bulkFilter)}
${d.note ? `<p class="note">${esc(d.note)}</p>` : ''}
<table class="tasks"><thead><tr><th>Task</th><th>Title</th><th>Workflow</th><th>Status</th><th>Tags</th><th>Progress</th><th>Created</th><th>Updated</th></tr></thead>
<tbody>${rows.join('\n') || '<tr><td colspan="8" class="empty">No tasks match.</td></tr>'}</tbody></table>
<nav class="paging">${f.cursor ? `<a href="/${query(f)}" data-page="first">← First page</a>` : ''}${d.nextCursor ? ` <a href="/${query(f, d.nextCursor)}" data-page="next">Next page →</a>` : ''}</nav>
</section>`;
}

const ACTIONS: Record<string, string> = { cancel: 'Cancel', retry: 'Retry', pause: 'Pause', resume: 'Resume' };

export interface TaskPageData {
  task: TaskInfo;
  legalEvents: readonly string[];
  summary: string;
  identity: Identity;
  now: number;
  /** The task's state machine, when the server has its definition (`stepwise serve <module>`). */
  graph?: MachineGraph;
}

export function taskPage(d: TaskPageData): string {
  const t = d.task;
  const operate = can(d.identity, 'operate');
  const commands = operate
    ? d.legalEvents
        // A finished task other than a failed one runs again only from a step (the step list's buttons).
        .filter((e) => ACTIONS[e] && (e !== 'retry' || t.status === 'failed'))
        .map((e) => `<button type="button" data-action="${esc(e)}" data-task="${esc(t.id)}"${e === 'cancel' ? ' class="danger"' : ''}>${ACTIONS[e]}</button>`)
    : [];
  // A finished task can be deleted, by an admin, after a confirmation.
  if (can(d.identity, 'delete') && isFinished(t.status)) commands.push(`<button type="button" data-delete data-task="${esc(t.id)}" class="danger">Delete</button>`);
  const actions = commands.join(' ');
  return `<section class="task" data-live="task" data-task="${esc(t.id)}" data-status="${esc(t.status)}">
<p><a href="/">← Tasks</a></p>
<h1><span class="id">${esc(t.id)}</span> ${badge(t.status)}</h1>
<p class="summary">${esc(d.summary)}</p>
<dl class="facts">${t.title ? `<dt>Title</dt><dd class="title">${esc(t.title)}</dd>` : ''}${Object.keys(t.tags ?? {}).length ? `<dt>Tags</dt><dd class="tags">${tagChips(t.tags)}</dd>` : ''}${t.forkedFrom ? `<dt>Forked from</dt><dd class="forked"><a href="/tasks/${esc(t.forkedFrom)}">${esc(t.forkedFrom)}</a></dd>` : ''}<dt>Workflow</dt><dd>${esc(t.workflow)} <small>v${esc(t.workflowVersion)}</small></dd>
${t.debounceKey ? `<dt>Debounce key</dt><dd>${esc(t.debounceKey)}</dd>` : ''}${t.singletonKey ? `<dt>Singleton key</dt><dd>${esc(t.singletonKey)}</dd>` : ''}
<dt>Created</dt><dd>${time(t.createdAt)}</dd><dt>Finished</dt><dd>${time(t.finishedAt)}</dd><dt>Runs</dt><dd>${t.runs}</dd><dt>Retries</dt><dd>${t.retries}</dd>
${usageFacts(t)}${t.lease ? `<dt>Lease</dt><dd>${esc(t.lease.owner)} until ${time(t.lease.expiresAt)}</dd>` : ''}${t.cancelReason ? `<dt>Cancel reason</dt><dd>${esc(t.cancelReason)}</dd>` : ''}</dl>
<div class="actions" id="actions">${actions}</div>
<p class="flash" id="flash" role="status"></p>
${t.machine ? machineSection(t.id, t.machine, d) : ''}
${approvalsSection(d)}
<section class="streams" data-streams hidden><h2>Model output</h2></section>
${treeSection(t)}
<h2>Steps</h2>
${timeline(t, d.now, can(d.identity, 'operate'))}
<div class="io"><div><h3>Input</h3><pre>${json(t.input)}</pre></div>
${t.status === 'succeeded' ? `<div><h3>Output</h3><pre class="output">${json(t.output)}</pre></div>` : ''}
${t.status === 'failed' ? `<div><h3>Error</h3><pre class="error">${esc(t.error.message)}</pre></div>` : ''}</div>
<h2>Lifecycle</h2>
${lifecycleSvg(t.status)}
<h2>Event log</h2>
${eventLog(t.history)}
</section>`;
}

/** A task's parent and its child tasks, each linked to its page, with its status. */
function treeSection(t: TaskInfo): string {
  if (!t.parent && !t.children.length) return '';
  const link = (r: { id: string; workflow: string; status: string }): string =>
    `<a href="/tasks/${encodeURIComponent(r.id)}"><span class="id">${esc(r.id)}</span></a> ${esc(r.workflow)} ${badge(r.status)}`;
  const parent = t.parent ? `<p class="parent">Parent: ${link(t.parent)}</p>` : '';
  const children = t.children.length ? `<ul class="children">${t.children.map((c) => `<li data-child="${esc(c.id)}">${link(c)}</li>`).join('\n')}</ul>` : '';
  return `<h2>Child tasks</h2><section class="tree">${parent}${children}</section>`;
}

/** A state machine's task: its state, the events it takes (buttons), its diagram, its states so far. */
function machineSection(id: string, m: MachineInfo, d: TaskPageData): string {
  const send =
    can(d.identity, 'operate') && m.legalEvents.length
      ? `<div class="send"><label>Payload (JSON, optional) <textarea name="payload" rows="2"></textarea></label>
${m.legalEvents.map((e) => `<button type="button" data-send="${esc(e)}" data-task="${esc(id)}">${esc(e)}</button>`).join(' ')}</div>`
      : '';
  const takes = m.legalEvents.length ? `takes ${m.legalEvents.map((e) => `<code>${esc(e)}</code>`).join(', ')}` : 'takes no event now';
  const history = m.history.map(
    (h) =>
      `<li data-state="${esc(h.state)}">${time(h.at)} ${h.from ? `${esc(h.from)} <span class="event">—${esc(h.event ?? '')}→</span> ` : ''}<b>${esc(h.state)}</b>${h.by ? ` <small>by ${esc(h.by.id)}</small>` : ''}</li>`,
  );
  const refused = m.refused.map((r) => `<li>${time(r.at)} <code>${esc(r.event)}</code> in ${esc(r.state)}${r.by ? ` from ${esc(r.by.id)}` : ''}: every guard said no</li>`);
  return `<section class="machine" data-machine-state="${esc(m.state)}">
<h2>State machine</h2>
<p>In state <b class="machine-state">${esc(m.state)}</b> since ${time(m.since)}; ${takes}.</p>
${send}
${d.graph ? machineSvg(d.graph, m.state) : ''}
<ol class="states">${history.join('\n')}</ol>
${refused.length ? `<h3>Refused events</h3><ul class="refused">${refused.join('\n')}</ul>` : ''}
<details><summary>Context</summary><pre>${json(m.context)}</pre></details>
</section>`;
}

/** The task's model usage (tokens, cost, attempts) and its budget, when a model was called. */
function usageFacts(t: TaskSummary): string {
  const u = t.usage;
  if (!u) return '';
  const budget = u.budget ? [u.budget.tokens !== undefined ? `${tokens(u.budget.tokens)} tokens` : '', u.budget.usd !== undefined ? usd(u.budget.usd) : ''].filter(Boolean).join(', ') : '';
  return (
    `<dt>Tokens</dt><dd class="usage-total" data-tokens="${u.total.totalTokens}">${usageText(u.total)}</dd><dt>Cost</dt><dd class="cost-total" data-usd="${u.total.costUsd}">${usd(u.total.costUsd)}</dd>${budget ? `<dt>Budget</dt><dd>${esc(budget)}</dd>` : ''}` +
    (u.children ? `<dt>Child tasks</dt><dd class="usage-children" data-tokens="${u.children.totalTokens}">${usageText(u.children)}, ${usd(u.children.costUsd)}</dd>` : '')
  );
}

function usageText(u: UsageTotals): string {
  return `${tokens(u.totalTokens)} <small>(${tokens(u.inputTokens)} in / ${tokens(u.outputTokens)} out, ${u.attempts} call${u.attempts === 1 ? '' : 's'})</small>`;
}

const OPEN: ReadonlySet<string> = new Set(['pending', 'escalated']);

function approvalsSection(d: TaskPageData): string {
  const list: readonly ApprovalInfo[] = d.task.approvals;
  if (list.length === 0) return '';
  const decide = can(d.identity, 'decide');
  const live = !isFinished(d.task.status) && d.task.status !== 'cancelling';
  const items = list.map((a) => {
    const open = OPEN.has(a.status);
    const listed = a.approvers.length === 0 || a.approvers.includes(d.identity.name);
    const decided = a.decisions.some((x) => x.by === d.identity.name);
    // The data box starts from the payload: what the reviewer edits is what the workflow gets back.
    // A task that ended or is being cancelled takes no decisions, whatever its approvals still say.
    const form =
      open && live && decide && listed && !decided
        ? `<div class="decide" data-approval="${esc(a.id)}"><label>Comment <textarea name="comment" rows="2"></textarea></label>
<label>Data (JSON, optional: handed back to the workflow only if you edit it) <textarea name="data" rows="4">${a.payload !== null && a.payload !== undefined ? json(a.payload, 100_000) : ''}</textarea></label>
<button type="button" data-decide="approve">Approve</button> <button type="button" data-decide="reject" class="danger">Reject</button></div>`
        : '';
    const facts = [
      a.approvers.length ? `approvers: ${a.approvers.join(', ')}` : 'anyone may decide',
      a.quorum > 1 ? `quorum ${a.quorum}` : '',
      a.level > 1 ? `escalation level ${a.level}` : '',
    ]
      .filter(Boolean)
      .join(' · ');
    const deadline = a.deadline && open ? ` <small class="deadline">decide by ${time(a.deadline.getTime())}</small>` : '';
    const payload = a.payload !== null && a.payload !== undefined ? `<pre class="payload">${json(a.payload)}</pre>` : '';
    const decisions = a.decisions.length
      ? `<ul class="decisions">${a.decisions.map((x) => `<li data-by="${esc(x.by)}">${badge(x.approve ? 'approved' : 'rejected')} by ${esc(x.by)} ${time(x.at.getTime())}${x.comment ? ` — “${esc(x.comment)}”` : ''}${x.data !== null && x.data !== undefined ? ` <small>data ${json(x.data, 300)}</small>` : ''}</li>`).join('')}</ul>`
      : '';
    const outcome = a.outcome?.timedOut ? ` <small>decided by its timeout policy${a.outcome.escalations ? ` after ${a.outcome.escalations} escalation(s)` : ''}</small>` : '';
    return `<li class="approval" data-approval-id="${esc(a.id)}" data-approval-status="${esc(a.status)}"><strong>${esc(a.name)}</strong> ${badge(a.status)}${outcome} <small>${esc(facts)}</small>${deadline}${payload}${decisions}${form}</li>`;
  });
  return `<h2>Approvals</h2><ul class="approvals">${items.join('\n')}</ul>`;
}

/** The step's "re-run from here" (a finished task) and "fork from here" buttons, for an operator. */
function rerunButtons(t: TaskInfo, s: TaskInfo['steps'][number], operate: boolean): string {
  if (!operate || s.cleanup || (s.status !== 'completed' && s.status !== 'failed')) return '';
  const attrs = `data-task="${esc(t.id)}" data-step="${esc(s.name)}"`;
  const rerun = isFinished(t.status) ? `<button type="button" class="small" data-rerun="retry" ${attrs}>Re-run from here</button>` : '';
  // A succeeded task's compensations never ran: it may be undone from here first (a cleanup undid the others').
  const undo =
    t.status === 'succeeded'
      ? `<button type="button" class="small" data-rerun="retry" data-compensate="1" ${attrs} title="Run the compensations of the steps from here on (newest first), then re-run from here">Undo and re-run from here</button>`
      : '';
  return `${rerun}${undo}<button type="button" class="small" data-rerun="fork" ${attrs}>Fork from here</button>`;
}

function timeline(t: TaskInfo, now: number, operate: boolean): string {
  if (!t.steps.length) return '<p class="empty">No steps yet.</p>';
  const t0 = Math.min(t.createdAt, ...t.steps.map((s) => s.startedAt ?? t.createdAt));
  const t1 = Math.max(t.finishedAt ?? now, ...t.steps.map((s) => s.finishedAt ?? now));
  const span = Math.max(1, t1 - t0);
  const pct = (ms: number): string => `${(((ms - t0) / span) * 100).toFixed(2)}%`;
  // Failed attempts, from the log: when each ended and why.
  const failures = new Map<number, Array<{ at: number; attempt: number; message: string }>>();
  for (const e of t.history) {
    if (e.type === 'step:retrying' || e.type === 'step:failed') {
      const list = failures.get(e.step.seq) ?? [];
      list.push({ at: e.at, attempt: e.step.attempts, message: e.step.error?.message ?? '' });
      failures.set(e.step.seq, list);
    }
  }
  const rows = t.steps.map((s) => {
    const start = s.startedAt ?? t0;
    const end = s.finishedAt ?? t.finishedAt ?? now;
    const marks = (failures.get(s.seq) ?? []).map((f) => `<span class="attempt-fail" style="left:${pct(f.at)}" title="${esc(`attempt ${f.attempt} failed: ${f.message}`)}"></span>`).join('');
    const width = `${Math.max(0.5, ((end - start) / span) * 100).toFixed(2)}%`;
    const u = t.usage?.steps[s.name];
    const usage = u
      ? `<td class="tokens" data-tokens="${u.totalTokens}">${usageText(u)}</td><td class="cost" data-usd="${u.costUsd}">${usd(u.costUsd)}</td>`
      : '<td class="tokens"></td><td class="cost"></td>';
    return `<tr class="step s-${esc(s.status)}" data-step="${esc(s.name)}"><td>${esc(s.name)} <small>${esc(s.kind)}</small></td><td>${badge(s.status)}</td><td>${s.attempts}</td><td>${duration(s.durationMs)}</td>${usage}
<td class="bar-cell"><div class="track"><span class="bar s-${esc(s.status)}" style="left:${pct(start)};width:${width}" title="${esc(`${s.name}: ${s.status}, ${s.attempts} attempt(s)`)}"></span>${marks}</div></td>
<td class="err">${s.error ? esc(s.error.message) : ''}</td><td class="rerun">${rerunButtons(t, s, operate)}</td></tr>`;
  });
  return `<table class="timeline"><thead><tr><th>Step</th><th>Status</th><th>Attempts</th><th>Duration</th><th>Tokens</th><th>Cost</th><th>Timeline</th><th>Error</th><th></th></tr></thead><tbody>${rows.join('\n')}</tbody>${totalRow(t)}</table>`;
}

/** The task's total under the timeline's tokens and cost columns. */
function totalRow(t: TaskInfo): string {
  if (!t.usage) return '';
  return `<tfoot><tr class="total"><td colspan="4">Task total</td><td class="tokens" data-tokens="${t.usage.total.totalTokens}">${usageText(t.usage.total)}</td><td class="cost" data-usd="${t.usage.total.costUsd}">${usd(t.usage.total.costUsd)}</td><td colspan="3"></td></tr></tfoot>`;
}

function describeEvent(e: TaskEvent): string {
  switch (e.type) {
    case 'transition':
      return `<b>${esc(e.event)}</b> ${esc(e.from ?? '∅')} → ${badge(e.to)}${e.detail ? ` <small>${json(e.detail, 300)}</small>` : ''}${e.error ? ` <span class="err">${esc(e.error.message)}</span>` : ''}`;
    case 'step:completed':
    case 'step:failed':
    case 'step:retrying':
    case 'step:waiting':
      return `<b>${esc(e.type)}</b> ${esc(e.step.name)} <small>attempt ${e.step.attempts}</small>${e.step.error ? ` <span class="err">${esc(e.step.error.message)}</span>` : ''}`;
    case 'step:forgotten':
      return `<b>step:forgotten</b> positions ${esc(e.seqs.join(', '))}`;
    case 'signal:received':
      return `<b>signal</b> ${esc(e.name)} <small>${json(e.payload, 300)}</small>`;
    case 'signal:consumed':
      return `<b>signal consumed</b> at position ${e.position}`;
    case 'usage:attempt': {
      const u = e.usage;
      return `<b>usage</b> ${esc(u.step)} <small>attempt ${u.attempt} · ${esc(u.model)} · ${u.inputTokens} in / ${u.outputTokens} out · $${u.costUsd.toFixed(4)} · ${esc(u.outcome)}${u.estimated ? ' (estimated)' : ''}</small>`;
    }
    case 'approval:decision':
      return `<b>approval decision</b> ${esc(e.name)}: ${badge(e.detail.approve === true ? 'approved' : 'rejected')}${typeof e.detail.comment === 'string' && e.detail.comment ? ` “${esc(e.detail.comment)}”` : ''}${e.detail.data !== null && e.detail.data !== undefined ? ` <small>data ${json(e.detail.data, 300)}</small>` : ''}`;
    case 'approval:requested':
    case 'approval:reminded':
    case 'approval:escalated':
    case 'approval:decided':
      return `<b>${esc(e.type)}</b> ${esc(e.name)} <small>${json(e.detail, 300)}</small>`;
    case 'unknown':
      return `<b>${esc(e.original)}</b> <small>${json(e.data, 300)}</small>`;
    default: {
      // Entries without a view of their own (idempotency, approvals, …): their type and fields.
      const { taskId: _task, seq: _seq, at: _at, actor: _actor, type, ...fields } = e;
      return `<b>${esc(type)}</b> <small>${json(fields, 300)}</small>`;
    }
  }
}

function eventLog(history: readonly TaskEvent[]): string {
  const rows = history.map((e) => `<tr data-seq="${e.seq}"><td>${e.seq}</td><td>${time(e.at)}</td><td>${esc(e.actor.kind)}:${esc(e.actor.id)}</td><td>${describeEvent(e)}</td></tr>`);
  return `<table class="events"><thead><tr><th>#</th><th>At</th><th>Actor</th><th>Entry</th></tr></thead><tbody>${rows.join('\n')}</tbody></table>`;
}

/** The sign-in form; `csrf` is the form's one-time token (matched with its cookie by `login.ts`). */
export function loginPage(message: string | null, csrf: string): string {
  return `<section class="login"><h1>Sign in</h1>${message ? `<p class="flash error">${esc(message)}</p>` : ''}
<form method="post" action="/login"><input type="hidden" name="csrf" value="${esc(csrf)}"><label>Token <input type="password" name="token" autocomplete="current-password" required></label> <button type="submit">Sign in</button></form>
<p><small>Signing in starts a session of this server, kept in an HTTP-only cookie (the token itself is not stored in the browser).</small></p></section>`;
}
