/**
 * @module server/dashboard/alerts-page
 * The dashboard's alerts page: the alerts workers raised, newest first, each with its kind, what
 * it is about (linked to the task, or the workflow's task list), its message and the worker that
 * raised it; filtered by kind (in the URL, so a view can be shared) and paged.
 */
import { ALERT_KINDS, type AlertInfo, type AlertKind } from '../../index.ts';
import { esc, time } from './html.ts';

/** The page's filter, as given in its URL. */
export interface AlertsFilter {
  kinds: readonly AlertKind[] | null;
  workflow: string | null;
  taskId: string | null;
}

/** The page's URL for `filter`, and the page after `cursor`. */
function urlOf(filter: AlertsFilter, cursor?: string): string {
  const q = new URLSearchParams();
  if (filter.kinds) q.set('kind', filter.kinds.join(','));
  if (filter.workflow) q.set('workflow', filter.workflow);
  if (filter.taskId) q.set('taskId', filter.taskId);
  if (cursor) q.set('cursor', cursor);
  const s = q.toString();
  return s ? `/alerts?${s}` : '/alerts';
}

export function alertsPage(list: readonly AlertInfo[], filter: AlertsFilter, next: string | null): string {
  const about = (a: AlertInfo): string =>
    a.taskId ? `<a href="/tasks/${esc(a.taskId)}">task ${esc(a.taskId)}</a>` : a.workflow ? `<a href="/?workflow=${encodeURIComponent(a.workflow)}">${esc(a.workflow)}</a>` : esc(a.subject);
  const rows = list.map(
    (a) =>
      `<tr data-alert="${esc(a.id)}"><td>${time(a.at)}</td><td><span class="badge">${esc(a.kind)}</span></td><td>${about(a)}</td><td>${esc(a.message)}</td><td><small>${esc(a.raisedBy)}</small></td></tr>`,
  );
  // One link per kind, keeping the workflow and task of the filter.
  const current = (kinds: readonly AlertKind[] | null): string => (String(kinds ?? '') === String(filter.kinds ?? '') ? ' aria-current="page"' : '');
  const kinds = [`<a href="${esc(urlOf({ ...filter, kinds: null }))}"${current(null)}>all</a>`]
    .concat(ALERT_KINDS.map((k) => `<a href="${esc(urlOf({ ...filter, kinds: [k] }))}"${current([k])}>${k}</a>`))
    .join(' · ');
  const more = next ? `<p><a href="${esc(urlOf(filter, next))}">Older alerts →</a></p>` : '';
  return `<section class="alerts">
<h1>Alerts</h1>
<p><a href="/">← Tasks</a></p>
<nav class="kinds">${kinds}</nav>
<table class="alerts"><thead><tr><th>Raised</th><th>Kind</th><th>About</th><th>Message</th><th>Worker</th></tr></thead>
<tbody>${rows.join('\n') || '<tr><td colspan="5" class="empty">No alerts. Workers raise them when the engine has <code>alerts</code> set (see docs/operations.md).</td></tr>'}</tbody></table>
${more}
</section>`;
}
