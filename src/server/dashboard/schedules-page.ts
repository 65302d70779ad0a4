/**
 * @module server/dashboard/schedules-page
 * The dashboard's schedules page: each schedule with its cron, zone, next and last run (linked to
 * the task it started), what it skipped, and Pause / Resume / Run now for roles that may operate.
 */
import type { ScheduleInfo } from '../../index.ts';
import { can, type Identity } from '../auth.ts';
import { esc, time } from './html.ts';

export function schedulesPage(list: readonly ScheduleInfo[], identity: Identity): string {
  const operate = can(identity, 'operate');
  const buttons = (s: ScheduleInfo): string =>
    operate
      ? `<button type="button" data-schedule="${esc(s.id)}" data-schedule-action="${s.paused ? 'resume' : 'pause'}">${s.paused ? 'Resume' : 'Pause'}</button> <button type="button" data-schedule="${esc(s.id)}" data-schedule-action="trigger">Run now</button>`
      : '';
  const rows = list.map(
    (s) => `<tr data-schedule-row="${esc(s.id)}">
<td>${esc(s.id)}${s.source === 'workflow' ? ' <small>declared</small>' : ''}</td><td>${esc(s.workflow)}</td><td><code>${esc(s.cron)}</code> <small>${esc(s.timezone)}</small></td>
<td>${s.paused ? '<span class="badge">paused</span>' : s.nextRunAt === null ? '-' : time(s.nextRunAt)}</td>
<td>${s.lastRunAt === null ? '-' : time(s.lastRunAt)}${s.lastTaskId ? ` <a href="/tasks/${esc(s.lastTaskId)}">task</a>` : ''}${s.bufferedAt !== null ? ' <small>one tick waiting</small>' : ''}</td>
<td>${s.overlap}</td><td>${s.skipped}</td><td>${buttons(s)}</td></tr>`,
  );
  return `<section class="schedules">
<h1>Schedules</h1>
<p><a href="/">← Tasks</a></p>
<table class="schedules"><thead><tr><th>Schedule</th><th>Workflow</th><th>Cron</th><th>Next run</th><th>Last run</th><th>Overlap</th><th>Skipped</th><th></th></tr></thead>
<tbody>${rows.join('\n') || '<tr><td colspan="8" class="empty">No schedules. Create one with engine.schedules.create, POST /api/schedules or stepwise schedules create.</td></tr>'}</tbody></table>
</section>`;
}
