/**
 * @module server/dashboard/html
 * HTML building for the dashboard: escaping (every value from a task is escaped, so a workflow
 * input cannot inject markup), the page layout, and small formatting helpers.
 */
export function esc(v: unknown): string {
  return String(v ?? '').replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch] as string);
}

/** A status as people read it: a cancelling task is shown as still stopping. */
export function statusLabel(status: string): string {
  return status === 'cancelling' ? 'cancelling…' : status;
}

export function badge(status: string): string {
  return `<span class="badge s-${esc(status)}" data-status="${esc(status)}">${esc(statusLabel(status))}</span>`;
}

export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return `<time datetime="${new Date(ms).toISOString()}">${new Date(ms).toISOString().replace('T', ' ').slice(0, 19)}</time>`;
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

export function json(v: unknown, max = 2000): string {
  let text: string;
  try {
    text = JSON.stringify(v, null, 2) ?? 'undefined';
  } catch {
    text = String(v);
  }
  return esc(text.length > max ? `${text.slice(0, max)}…` : text);
}

export function layout(title: string, who: { name: string; role: string } | null, body: string, data: Record<string, string> = {}): string {
  const attrs = Object.entries(data)
    .map(([k, v]) => ` data-${k}="${esc(v)}"`)
    .join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)} · Stepwise</title><link rel="stylesheet" href="/assets/app.css"></head>
<body${attrs}>
<header><a class="brand" href="/">Stepwise</a>${who ? ' <a href="/schedules" class="nav">Schedules</a> <a href="/alerts" class="nav">Alerts</a>' : ''}${who ? `<span class="who">${esc(who.name)} <small>(${esc(who.role)})</small> <form method="post" action="/logout" class="inline"><button type="submit" class="link">Sign out</button></form></span>` : ''}</header>
<main id="main">${body}</main>
<script src="/assets/app.js" defer></script>
</body></html>`;
}

/** A token count as people read it: 950, 12.3k, 4.1M. */
export function tokens(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** A cost in US dollars: cents shown to four places below a dollar (model calls cost fractions of a cent). */
export function usd(v: number): string {
  return `$${v.toFixed(v < 1 ? 4 : 2)}`;
}
