/**
 * @module server/dashboard/alerts-page
 * The dashboard's alerts page: the alerts workers raised, newest first, each with its kind, what
 * it is about (linked to the task, or the workflow's task list), its message and the worker that
 * raised it; filtered by kind (in the URL, so a view can be shared) and paged.
 */
import type { AlertInfo, AlertKind } from '../../index.ts';
import { esc, time } from './html.ts';

export const ALERT_PAGE_KINDS: readonly AlertKind[] = ['failure-rate', 'crash-loop', 'workers-gone', 'stuck', 'budget'];

export function alertsPage(list: readonly AlertInfo[], filter: { kind: AlertKind | null; next: string | null }): string {
  const about = (a: AlertInfo): string =>
    a.taskId ? `<a href="/tasks/${esc(a.taskId)}">task ${esc(a.taskId)}</a>` : a.workflow ? `<a href="/?workflow=${encodeURIComponent(a.workflow)}">${esc(a.workflow)}</a>` : esc(a.subject);
  const rows = list.map(
    (a) =>
      `<tr data-alert="${esc(a.id)}"><td>${time(a.at)}</td><td><span class="badge">${esc(a.kind)}</span></td><td>${about(a)}</td><td>${esc(a.message)}</td><td><small>${esc(a.raisedBy)}</small></td></tr>`,
  );
  const kinds = [`<a href="/alerts"${filter.kind === null ? ' aria-current="page"' : ''}>all</a>`]
    .concat(ALERT_PAGE_KINDS.map((k) => `<a href="/alerts?kind=${k}"${filter.kind === k ? ' aria-current="page"' : ''}>${k}</a>`))
    .join(' · ');
  const more = filter.next ? `<p><a href="/alerts?${filter.kind ? `kind=${filter.kind}&amp;` : ''}cursor=${esc(filter.next)}">Older alerts →</a></p>` : '';
  return `<section class="alerts">
<h1>Alerts</h1>
<p><a href="/">← Tasks</a></p>
<nav class="kinds">${kinds}</nav>
<table class="alerts"><thead><tr><th>Raised</th><th>Kind</th><th>About</th><th>Message</th><th>Worker</th></tr></thead>
<tbody>${rows.join('\n') || '<tr><td colspan="5" class="empty">No alerts. Workers raise them when the engine has <code>alerts</code> set (see docs/operations.md).</td></tr>'}</tbody></table>
${more}
</section>`;
}
