/**
 * @module cli/format
 * Human output of the CLI: tables, timelines, durations. `--json` bypasses all of it.
 */
import { approvalLines, describeApprovalEvent } from './approvals.ts';
import { describeClass, failedAttempts, formatMs, type MachineInfo, type StepInfo, type TaskEvent, type TaskInfo, type TaskSummary } from '../index.ts';
import { bold, colorStatus, dim, red, table, time, yellow } from './style.ts';

export function taskTable(tasks: TaskSummary[]): string {
  if (!tasks.length) return dim('(no tasks)');
  // A title column only when some task has a title (cut to 40 characters: `show` prints it whole).
  const titled = tasks.some((t) => t.title);
  const title = (t: TaskSummary): string[] => (titled ? [t.title ? (t.title.length > 40 ? `${t.title.slice(0, 39)}…` : t.title) : ''] : []);
  // A tags column only when some task has tags (cut to 40 characters as well).
  // (A summary from an older server has no tags.)
  const tagged = tasks.some((t) => t.tags && Object.keys(t.tags).length);
  const tags = (t: TaskSummary): string[] => (tagged ? [cut(tagText(t.tags), 40)] : []);
  return table(
    ['ID', ...(titled ? ['TITLE'] : []), 'WORKFLOW', 'STATUS', ...(tagged ? ['TAGS'] : []), 'RUNS', 'CREATED', 'UPDATED', 'PROGRESS'],
    tasks.map((t) => [t.id, ...title(t), `${t.workflow}@${t.workflowVersion}`, colorStatus(t.status), ...tags(t), String(t.runs), time(t.createdAt), time(t.updatedAt), progressText(t)]),
  );
}

const cut = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** `tenant=acme user=u1`. */
export function tagText(tags: Readonly<Record<string, string>>): string {
  return Object.entries(tags)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

/** `12/40 fetching pages (crawl)`, or empty: what a running step last reported. */
export function progressText(t: TaskSummary): string {
  const p = t.progress;
  if (!p || t.status === 'succeeded') return '';
  const count = p.done !== undefined ? (p.total !== undefined ? `${p.done}/${p.total}` : String(p.done)) : '';
  return [count, p.note, p.step ? dim(`(${p.step})`) : ''].filter(Boolean).join(' ');
}

/** A journal row of `show`; the cleanup's are numbered apart (`c1`, `c2`: `n`). */
function stepRow(s: StepInfo, n: number): string[] {
  const detail =
    s.status === 'completed' && s.error
      ? yellow(`skipped: ${s.error.message.split('\n')[0] ?? ''}`)
      : s.error
        ? red(s.error.message.split('\n')[0] ?? '')
        : s.kind !== 'step' && s.wakeAt
          ? dim(`until ${time(s.wakeAt)}`)
          : '';
  return [
    s.cleanup ? `c${n}` : String(s.seq),
    s.kind === 'step' ? s.name : `${s.name} (${s.kind})`,
    colorStatus(s.status),
    String(s.attempts || ''),
    s.durationMs === null ? '-' : formatMs(s.durationMs),
    `e${s.epoch}`,
    detail,
  ];
}

/** `key=value …` of an object's set fields. */
function pairs(o: Record<string, unknown> | undefined): string {
  if (!o) return '';
  return Object.entries(o)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

/** What an event did, in a few words: `claim pending → running e3`, `step fetch completed (attempt 2)`. */
export function describeEvent(e: TaskEvent): string {
  switch (e.type) {
    case 'transition': {
      const move = e.from === e.to ? colorStatus(e.to) : `${e.from ? colorStatus(e.from) : '∅'} → ${colorStatus(e.to)}`;
      return `${bold(e.event.padEnd(8))} ${move}${e.epoch !== undefined ? dim(` e${e.epoch}`) : ''} ${dim(pairs(e.detail))}`.trimEnd();
    }
    case 'step:completed':
    case 'step:failed':
    case 'step:retrying':
    case 'step:waiting': {
      const what = e.step.kind === 'step' ? 'step' : e.step.kind;
      const err = e.step.error ? red(` ${e.step.error.message.split('\n')[0] ?? ''}`) : '';
      return `${bold(what.padEnd(8))} ${e.step.name} ${colorStatus(e.step.status)}${e.step.attempts > 1 ? dim(` (attempt ${e.step.attempts})`) : ''}${err}`;
    }
    case 'step:forgotten':
      return `${bold('forget'.padEnd(8))} journal positions ${e.seqs.join(', ')}`;
    case 'signal:received':
      return `${bold('signal'.padEnd(8))} ${e.name} received${e.idempotencyKey ? dim(` key=${e.idempotencyKey}`) : ''}`;
    case 'signal:consumed':
      return `${bold('signal'.padEnd(8))} #${e.signalId} consumed at position ${e.position}`;
    case 'usage:attempt': {
      const u = e.usage;
      const outcome = u.outcome === 'succeeded' ? '' : ` ${u.outcome === 'failed' ? red(u.outcome) : yellow(u.outcome)}`;
      return `${bold('model'.padEnd(8))} ${u.step} attempt ${u.attempt} ${u.model}${outcome} ${dim(`${u.inputTokens} in / ${u.outputTokens} out${u.estimated ? ' (est.)' : ''} ${usd(u.costUsd)}`)}`;
    }
    case 'idempotency:hit':
    case 'idempotency:conflict':
    case 'idempotency:takeover':
      return `${bold('idem'.padEnd(8))} ${e.type.slice('idempotency:'.length)} ${e.key}${e.step ? ` in ${e.step}` : ''}${e.previousOwner ? dim(` from ${e.previousOwner}`) : ''}${e.ranByTask ? dim(` first run by ${e.ranByTask}`) : ''}`;
    case 'approval:requested':
    case 'approval:decision':
    case 'approval:reminded':
    case 'approval:escalated':
    case 'approval:decided':
      return describeApprovalEvent(e);
    case 'dwell:exceeded':
      return `${bold('dwell'.padEnd(8))} ${e.status} longer than ${formatMs(e.afterMs)} → ${e.outcome}`;
    case 'task:debounced':
      return `${bold('debounce'.padEnd(8))} key ${e.key}: new input, due ${time(e.runAt)}`;
    case 'unknown':
      return `${bold(e.original)}`;
  }
}

function eventLine(e: TaskEvent, start: number): string {
  const rel = `+${formatMs(e.at - start)}`.padStart(9);
  return `  ${dim(String(e.seq).padStart(3))} ${dim(time(e.at))} ${dim(rel)}  ${describeEvent(e)}  ${dim(`by ${e.actor.kind}:${e.actor.id}`)}`.trimEnd();
}

/** One line per failed attempt: `  fetch #2  [transient http 429, Retry-After 1000ms] Too many requests → retried`. */
function attemptLines(t: TaskInfo): string[] {
  return failedAttempts(t.history).map((a) => {
    const cls = describeClass(a.error);
    const code = a.error.code ? `${a.error.code} ` : '';
    const next = a.outcome === 'retried' ? dim(`→ retry${a.nextAt !== null ? ` at ${time(a.nextAt)}` : ''}`) : a.outcome === 'skipped' ? yellow('→ skipped') : red('→ failed');
    return `  ${a.step} ${dim(`attempt ${a.attempt}`)}  ${cls ? dim(`[${cls}] `) : ''}${red(`${code}${a.error.message.split('\n')[0] ?? ''}`)} ${next}`;
  });
}

export function taskDetail(t: TaskInfo): string {
  const out: string[] = [];
  out.push(`${bold('Task')} ${t.id}  ${colorStatus(t.status)}`);
  if (t.title) out.push(`  title      ${t.title}`);
  out.push(`  workflow   ${t.workflow} (version ${t.workflowVersion})`);
  if (t.idempotencyKey) out.push(`  key        ${t.idempotencyKey}`);
  if (t.debounceKey) out.push(`  debounce   ${t.debounceKey}${t.runs === 0 && t.status === 'pending' && t.runAt !== null ? ` (collecting starts until ${time(t.runAt)})` : ''}`);
  if (t.singletonKey) out.push(`  singleton  ${t.singletonKey}`);
  if (t.tags && Object.keys(t.tags).length) out.push(`  tags       ${tagText(t.tags)}`);
  if (t.forkedFrom) out.push(`  forked     from ${t.forkedFrom}`);
  out.push(`  created    ${time(t.createdAt)}${t.finishedAt ? `   finished ${time(t.finishedAt)} (${formatMs(t.finishedAt - t.createdAt)})` : ''}`);
  out.push(`  runs       ${t.runs}${t.retries ? `   retries ${t.retries}` : ''}   epoch ${t.epoch}`);
  if (t.lease) out.push(`  lease      ${t.lease.owner} until ${time(t.lease.expiresAt)}`);
  if (t.wait) out.push(`  waiting    ${JSON.stringify(t.wait)}`);
  if (t.pauseRequested) out.push(`  ${yellow('pause requested')}`);
  if (t.cancelReason) out.push(`  cancel     ${t.cancelReason}`);
  if (progressText(t)) out.push(`  progress   ${progressText(t)}${t.progress ? dim(` at ${time(t.progress.at)}`) : ''}`);
  out.push(`  input      ${truncate(JSON.stringify(t.input) ?? 'undefined')}`);
  if (t.status === 'succeeded') out.push(`  output     ${truncate(JSON.stringify(t.output) ?? 'undefined')}`);
  if (t.status === 'failed') out.push(`  error      ${red(`[${t.error.code ?? t.error.name}] ${t.error.message}`)}`);
  if (t.status === 'failed' && t.error.code === 'COMPENSATION_FAILED') {
    const what = t.error.data?.cancelled === true ? 'the task was cancelled, then its cleanup failed (it is not retried)' : 'its compensations failed after the failure';
    out.push(`  ${yellow('cleanup')}    ${what}: manual cleanup is needed`);
  }
  if (t.usage) out.push(...usageLines(t));
  if (t.machine) out.push(...machineLines(t.machine));
  out.push('', bold('Steps'));
  out.push(
    t.steps.length
      ? table(
          ['#', 'STEP', 'STATUS', 'ATTEMPTS', 'DURATION', 'RUN', ''],
          t.steps.map((s, i) => stepRow(s, i + 1 - t.steps.findIndex((x) => x.cleanup))),
        )
      : dim('  (none yet)'),
  );
  const attempts = attemptLines(t);
  if (attempts.length) out.push('', bold('Failed attempts'), ...attempts);
  if (t.approvals.length) out.push('', bold('Approvals'), ...t.approvals.map(approvalLines));
  out.push('', bold('Timeline'));
  const start = t.history[0]?.at ?? t.createdAt;
  for (const e of t.history) out.push(eventLine(e, start));
  return out.join('\n');
}

/** A state machine's state, the events it takes, and the states it went through. */
function machineLines(m: MachineInfo): string[] {
  const takes = m.legalEvents.length ? `takes ${m.legalEvents.join(', ')} (stepwise send <id> <event>)` : 'takes no event now';
  const out = [`  state      ${bold(m.state)} since ${time(m.since)}; ${takes}`, `  context    ${truncate(JSON.stringify(m.context) ?? 'undefined')}`];
  out.push(`  states     ${m.history.map((h) => (h.event ? `-${h.event}-> ${h.state}` : h.state)).join(' ')}`);
  for (const r of m.refused) out.push(`  ${yellow('refused')}    "${r.event}" in ${r.state}${r.by ? ` from ${r.by.id}` : ''}: every guard said no`);
  return out;
}

/** `$0.000123` (six decimals: model calls cost fractions of a cent). */
function usd(n: number): string {
  return `$${n.toFixed(6)}`;
}

/** Tokens and cost of a task and of each step that called a model. */
function usageLines(t: TaskInfo): string[] {
  const u = t.usage;
  if (!u) return [];
  const tokens = (x: { inputTokens: number; outputTokens: number; cachedInputTokens: number; reasoningTokens: number }): string =>
    `${x.inputTokens} in (${x.cachedInputTokens} cached) / ${x.outputTokens} out (${x.reasoningTokens} reasoning)`;
  const budget = u.budget
    ? dim(`   budget ${[u.budget.tokens !== undefined ? `${u.budget.tokens} tokens` : '', u.budget.usd !== undefined ? usd(u.budget.usd) : ''].filter(Boolean).join(', ')}`)
    : '';
  const out = [`  usage      ${tokens(u.total)}   ${usd(u.total.costUsd)}   ${u.total.attempts} model attempt${u.total.attempts === 1 ? '' : 's'}${budget}`];
  for (const [step, s] of Object.entries(u.steps)) out.push(`             ${step}: ${tokens(s)}   ${usd(s.costUsd)}   ${s.attempts} attempt${s.attempts === 1 ? '' : 's'}`);
  if (u.children)
    out.push(
      `  children   ${tokens(u.children)}   ${usd(u.children.costUsd)}   ${u.children.attempts} model attempt${u.children.attempts === 1 ? '' : 's'} ${dim('(every task below this one)')}`,
    );
  return out;
}

function truncate(s: string, n = 160): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
