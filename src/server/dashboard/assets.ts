/**
 * @module server/dashboard/assets
 * The dashboard's script and style sheet, served as they are (no build step). The script sends
 * the buttons' commands to the JSON API (with the CSRF header that cookie-authenticated writes
 * need), and keeps the page live: it follows the page's event stream (a task's log, or every
 * task's for the list) and re-renders the page's main section from the server on each entry; on
 * a task's page it also follows the task's token stream and shows each model step's text as it
 * comes.
 */
export const SCRIPT = String.raw`(() => {
  'use strict';
  const main = document.getElementById('main');
  if (!main) return;
  // Every entry type that changes what a page shows (usage: tokens and cost; approval entries: the approvals section).
  const TYPES = ['transition', 'step:completed', 'step:failed', 'step:retrying', 'step:waiting', 'step:forgotten', 'signal:received', 'signal:consumed', 'usage:attempt',
    'approval:requested', 'approval:decision', 'approval:reminded', 'approval:escalated', 'approval:decided', 'dwell:exceeded', 'task:debounced', 'unknown'];

  async function post(url, body) {
    const r = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', 'x-stepwise-csrf': '1' }, body: JSON.stringify(body || {}) });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error((data && data.error && data.error.message) || ('HTTP ' + r.status));
    return data;
  }
  function say(text, isError) {
    const f = document.getElementById('flash');
    if (!f) return;
    f.textContent = text;
    f.classList.toggle('error', !!isError);
  }

  let timer = null, busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const url = new URL(location.href);
      url.searchParams.set('fragment', '1');
      const r = await fetch(url, { credentials: 'same-origin' });
      if (!r.ok) return;
      const html = await r.text();
      // What someone is typing in a decision form survives the re-render.
      const kept = {};
      main.querySelectorAll('[data-approval] textarea').forEach((t) => { kept[t.closest('[data-approval]').dataset.approval + '/' + t.name] = t.value; });
      const flash = document.getElementById('flash');
      const flashText = flash ? flash.textContent : '';
      const flashError = !!flash && flash.classList.contains('error');
      main.innerHTML = html;
      drawStreams();
      main.querySelectorAll('[data-approval] textarea').forEach((t) => { const k = t.closest('[data-approval]').dataset.approval + '/' + t.name; if (k in kept) t.value = kept[k]; });
      const f2 = document.getElementById('flash');
      if (f2 && flashText) {
        // The message of the last action survives the re-render, an error still shown as one.
        f2.textContent = flashText;
        f2.classList.toggle('error', flashError);
      }
    } finally {
      busy = false;
      if (again) { again = false; schedule(50); }
    }
  }
  function schedule(ms) { clearTimeout(timer); timer = setTimeout(refresh, ms); }

  document.addEventListener('click', async (ev) => {
    const target = ev.target instanceof Element ? ev.target : null;
    const action = target && target.closest('button[data-action]');
    if (action) {
      action.disabled = true;
      try {
        const t = await post('/api/tasks/' + encodeURIComponent(action.dataset.task) + '/' + action.dataset.action);
        // A retried task had ended, and so had the page's log stream: a reload follows the new run live.
        if (action.dataset.action === 'retry') { location.reload(); return; }
        say(action.textContent + ': the task is ' + (t.status === 'cancelling' ? 'cancelling…' : t.status));
      } catch (e) {
        say(e.message, true);
      }
      return refresh();
    }
    const bulk = target && target.closest('button[data-bulk]');
    if (bulk) {
      const filter = JSON.parse(bulk.closest('[data-filter]').dataset.filter);
      const action = bulk.dataset.bulk;
      try {
        const plan = await post('/api/tasks/bulk', { action, filter, dryRun: true });
        if (!plan.acted) { say('No task of this filter to ' + action + ' (' + plan.matched + ' match).'); return; }
        if (!confirm(action + ' ' + plan.acted + ' task(s)' + (plan.truncated ? ' (the first of more)' : '') + '?')) return;
        const r = await post('/api/tasks/bulk', { action, filter });
        say(action + ': ' + r.acted + ' task(s)' + (r.failedCount ? ', ' + r.failedCount + ' failed: ' + r.failed[0].message : ''), r.failedCount > 0);
      } catch (e) {
        say(e.message, true);
      }
      return refresh();
    }
    const rerun = target && target.closest('button[data-rerun]');
    if (rerun) {
      rerun.disabled = true;
      try {
        const path = '/api/tasks/' + encodeURIComponent(rerun.dataset.task) + '/' + rerun.dataset.rerun;
        const body = { fromStep: rerun.dataset.step };
        if (rerun.dataset.compensate) {
          if (!confirm('Undo the steps from ' + rerun.dataset.step + ' on (their compensations run, newest first), then re-run from there?')) { rerun.disabled = false; return; }
          body.compensate = true;
        }
        const r = await post(path, body);
        if (rerun.dataset.rerun === 'fork') { location.href = '/tasks/' + encodeURIComponent(r.id); return; }
        // The finished task's log stream has ended: a reload follows the new run live.
        location.reload();
        return;
      } catch (e) {
        say(e.message, true);
      }
      return refresh();
    }
    const sched = target && target.closest('button[data-schedule-action]');
    if (sched) {
      sched.disabled = true;
      try {
        const r = await post('/api/schedules/' + encodeURIComponent(sched.dataset.schedule) + '/' + sched.dataset.scheduleAction);
        if (r.taskId) return (location.href = '/tasks/' + encodeURIComponent(r.taskId));
        return location.reload();
      } catch (e) {
        sched.disabled = false;
        return say(e.message, true);
      }
    }
    const send = target && target.closest('button[data-send]');
    if (send) {
      const box = send.closest('.send');
      const text = box ? box.querySelector('textarea[name=payload]').value.trim() : '';
      const body = {};
      if (text) {
        try { body.payload = JSON.parse(text); } catch (e) { return say('The payload is not valid JSON: ' + e.message, true); }
      }
      send.disabled = true;
      try {
        const r = await post('/api/tasks/' + encodeURIComponent(send.dataset.task) + '/send/' + encodeURIComponent(send.dataset.send), body);
        say('Sent ' + send.dataset.send + (r.state ? ' in state ' + r.state : '') + '.');
      } catch (e) {
        say(e.message, true);
      }
      return refresh();
    }
    const del = target && target.closest('button[data-delete]');
    if (del) {
      const id = del.dataset.task;
      if (!confirm('Delete task ' + id + ' with its steps, log and approvals? This cannot be undone.')) return;
      del.disabled = true;
      const r = await fetch('/api/tasks/' + encodeURIComponent(id), { method: 'DELETE', credentials: 'same-origin', headers: { 'x-stepwise-csrf': '1' } });
      const data = await r.json().catch(() => ({}));
      if (r.ok) return void (location.href = '/?deleted=' + encodeURIComponent(id));
      del.disabled = false;
      return say((data && data.error && data.error.message) || ('HTTP ' + r.status), true);
    }
    const decide = target && target.closest('button[data-decide]');
    if (decide) {
      const box = decide.closest('[data-approval]');
      const comment = box.querySelector('textarea[name=comment]').value.trim();
      const dataBox = box.querySelector('textarea[name=data]');
      const dataText = dataBox.value.trim();
      const body = { approve: decide.dataset.decide === 'approve' };
      if (comment) body.comment = comment;
      // The box starts from the payload: only data the reviewer edited goes back to the workflow.
      if (dataText && dataText !== dataBox.defaultValue.trim()) {
        try { body.data = JSON.parse(dataText); } catch (e) { return say('The data is not valid JSON: ' + e.message, true); }
      }
      decide.disabled = true;
      try {
        await post('/api/approvals/' + encodeURIComponent(box.dataset.approval) + '/decide', body);
        say(body.approve ? 'Approved.' : 'Rejected.');
      } catch (e) {
        say(e.message, true);
      }
      return refresh();
    }
  });

  // A task's model output as it streams: text per step, emptied by a retried attempt's reset frame.
  // Kept here, so the page's re-renders do not lose it; written with textContent (it is model text).
  const streams = new Map();
  function drawStreams() {
    const box = main.querySelector('[data-streams]');
    if (!box || !streams.size) return;
    box.hidden = false;
    for (const [step, s] of streams) {
      let el = [...box.querySelectorAll('[data-stream-step]')].find((e) => e.dataset.streamStep === step);
      if (!el) {
        el = document.createElement('div');
        el.className = 'stream';
        el.dataset.streamStep = step;
        el.appendChild(document.createElement('h3'));
        el.appendChild(document.createElement('pre'));
        box.appendChild(el);
      }
      el.querySelector('h3').textContent = step + (s.attempt > 1 ? ' (attempt ' + s.attempt + ')' : '');
      el.querySelector('pre').textContent = s.text;
    }
  }

  const live = main.querySelector('[data-live]');
  if (!live || typeof EventSource === 'undefined') return;
  if (live.dataset.live === 'task') {
    const frames = new EventSource('/api/tasks/' + encodeURIComponent(live.dataset.task) + '/stream');
    const onFrame = (ev) => {
      const f = JSON.parse(ev.data);
      const s = streams.get(f.step);
      if (ev.type === 'stream:reset' || !s || s.attempt !== f.attempt) streams.set(f.step, { attempt: f.attempt, text: f.delta });
      else s.text += f.delta;
      drawStreams();
    };
    frames.addEventListener('stream:delta', onFrame);
    frames.addEventListener('stream:reset', onFrame);
    frames.addEventListener('end', () => frames.close());
  }
  let source;
  if (live.dataset.live === 'task') {
    const seqs = [...main.querySelectorAll('tr[data-seq]')].map((r) => Number(r.dataset.seq));
    const after = seqs.length ? Math.max(...seqs) : 0;
    source = new EventSource('/api/tasks/' + encodeURIComponent(live.dataset.task) + '/events?after=' + after);
    source.addEventListener('end', () => { source.close(); schedule(0); });
  } else {
    source = new EventSource('/api/events');
  }
  const delay = live.dataset.live === 'task' ? 30 : 300;
  for (const type of TYPES) source.addEventListener(type, () => schedule(delay));
  source.addEventListener('ready', () => document.body.setAttribute('data-live-ready', 'true'));
})();
`;

export const STYLE = `
:root { --fg:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f9fafb; --accent:#2563eb; --bad:#b91c1c; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color:var(--fg); background:var(--bg); }
header { display:flex; justify-content:space-between; align-items:center; padding:10px 20px; background:#111827; color:#fff; }
header a.brand { color:#fff; font-weight:700; text-decoration:none; }
header .who small { color:#9ca3af; }
main { padding: 16px 24px; max-width: 1200px; margin: 0 auto; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; width: 100%; background:#fff; }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align: top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; background:#e5e7eb; }
.s-running, .badge.s-running { background:#dbeafe; } .badge.s-succeeded, .badge.s-completed { background:#dcfce7; }
.badge.s-failed { background:#fee2e2; color:var(--bad); } .badge.s-cancelling { background:#fef3c7; } .badge.s-cancelled { background:#f3f4f6; color:var(--muted); }
.badge.s-waiting { background:#ede9fe; } .badge.s-paused { background:#fde68a; } .badge.s-retrying { background:#ffedd5; }
.views a { margin-right:12px; } .views a.active { font-weight:700; text-decoration:none; color:var(--fg); }
.filters { margin:12px 0; display:flex; flex-wrap:wrap; gap:12px; align-items:end; }
.tag { display:inline-block; padding:0 6px; margin:1px 2px; border-radius:8px; background:#eef; font-size:12px; text-decoration:none; }
button { font:inherit; padding:5px 12px; border-radius:6px; border:1px solid #9ca3af; background:#fff; cursor:pointer; }
button.danger { border-color:var(--bad); color:var(--bad); } button.link { border:none; background:none; color:#93c5fd; padding:0; }
button.small { padding:1px 6px; font-size:12px; margin-left:4px; }
form.inline { display:inline; }
.actions { margin:12px 0; display:flex; gap:8px; }
.flash { min-height: 1.4em; } .flash.error, .err, pre.error { color:var(--bad); }
.facts { display:grid; grid-template-columns: max-content 1fr; gap:2px 16px; }
.facts dt { color:var(--muted); }
.track { position:relative; height:14px; background:#f3f4f6; border-radius:3px; min-width:240px; }
.bar { position:absolute; top:2px; height:10px; border-radius:3px; background:#60a5fa; }
.bar.s-completed { background:#22c55e; } .bar.s-failed { background:#ef4444; } .bar.s-retrying { background:#f97316; } .bar.s-waiting { background:#a78bfa; }
.attempt-fail { position:absolute; top:0; width:2px; height:14px; background:var(--bad); }
pre { background:#fff; border:1px solid var(--line); padding:8px; overflow:auto; max-height:260px; }
.io { display:grid; grid-template-columns: repeat(auto-fit, minmax(280px, 1fr)); gap:12px; }
svg.lifecycle, svg.machine { width:100%; max-width:860px; background:#fff; border:1px solid var(--line); }
svg .node.final rect { stroke-width:3; } section.machine ol.states { padding-left:1.2em; } section.machine .event { color:var(--muted); }
svg .node rect { fill:#fff; stroke:#9ca3af; } svg .node text { text-anchor:middle; font-size:13px; }
svg .node.current rect { fill:#fde68a; stroke:#b45309; stroke-width:2; } svg .node.current text { font-weight:700; }
svg .edge { fill:none; stroke:#9ca3af; } svg .edge-label { font-size:9px; fill:var(--muted); text-anchor:middle; }
svg marker path { fill:#9ca3af; }
.approvals { list-style:none; padding:0; } .approval { background:#fff; border:1px solid var(--line); padding:10px; margin-bottom:8px; }
.decisions { list-style:none; padding:0; margin:6px 0; } .badge.s-approved { background:#dcfce7; } .badge.s-rejected, .badge.s-expired { background:#fee2e2; color:var(--bad); }
.badge.s-pending, .badge.s-escalated { background:#ede9fe; } td.tokens, td.cost { white-space:nowrap; } tfoot .total td { font-weight:600; }
.decide label { display:block; margin:6px 0; } .decide textarea { width:100%; font-family: ui-monospace, monospace; }
.note, .empty { color:var(--muted); }
.streams .stream pre { white-space:pre-wrap; max-height:360px; } .streams .stream h3 { margin:8px 0 4px; font-size:14px; }
.login form { display:flex; gap:8px; align-items:end; }
`;
