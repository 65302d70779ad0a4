/**
 * @module commands/explain
 * `engine.explain`: why a task is (not) moving, in one sentence, with what it waits for, who holds
 * it and what a person may do now.
 */
import { childEndSignal } from '../transitions.ts';
import { decodeError } from '../serialize.ts';
import { userEvents } from '../lifecycle.ts';
import type { QueuePosition, TaskRow } from '../store.ts';
import { machineInfo, type MachineInfo } from '../machine/read.ts';
import { taskRow, type CommandContext } from './context.ts';
import type { Explanation } from './options.ts';
import { failedCleanup, retryRefusal } from './retry.ts';
import { liveVersions } from '../worker/presence.ts';

/** What the summary is made of besides the row. */
interface Circumstances {
  now: number;
  lease: Explanation['lease'];
  wait: Record<string, unknown> | null;
  error: string | null;
  /** The versions of the task's workflow any worker ever registered. */
  registered: string[];
  /** The versions of the task's workflow that live workers serve now (see worker/presence.ts). */
  live: string[];
  /** Why a due task waits: its key's leased tasks and the higher-priority work ahead (when the store says). */
  queue: QueuePosition | null;
  /** A re-run that undoes first: the step it runs from (see run/undo-rerun.ts), or null. */
  undoFrom: string | null;
}

const at = (ms: number | null): string => (ms === null ? 'never' : new Date(ms).toISOString());

export async function explainTask(ctx: CommandContext, id: string): Promise<Explanation> {
  const store = await ctx.open();
  const row = await taskRow(store, id);
  const steps = await store.getSteps(id);
  const now = ctx.clock.now();
  const last = steps[steps.length - 1];
  const lease = row.leaseOwner && row.leaseExpiresAt !== null ? { owner: row.leaseOwner, expiresAt: row.leaseExpiresAt, expired: row.leaseExpiresAt <= now } : null;
  const wait = row.wait ? (JSON.parse(row.wait) as Record<string, unknown>) : null;
  const error = row.error ? decodeError(row.error).message : null;
  const registered = (await store.listWorkflows()).filter((w) => w.name === row.workflow).map((w) => w.version);
  const live = await liveVersions(store, row.workflow);
  const machine = machineInfo(row, steps);
  const due = (row.status === 'pending' || row.status === 'waiting') && row.runAt !== null && row.runAt <= now;
  const queue = due && store.queuePosition ? await store.queuePosition(row, now) : null;
  const undoFrom = row.undoFrom === null ? null : (steps.find((s) => s.seq === row.undoFrom)?.name ?? `position ${row.undoFrom}`);
  const summary = explainSummary(row, { now, lease, wait, error, registered, live, queue, undoFrom });
  return {
    id,
    status: row.status,
    summary: machine ? machineSummary(row, machine, wait, summary) : summary,
    legalEvents: userEvents(row).filter((ev) => ev !== 'retry' || !retryRefusal(row)),
    lease,
    wait,
    runAt: row.runAt,
    lastStep: last ? { name: last.name, status: last.status, attempts: last.attempts, error: last.error ? decodeError(last.error).message : null } : null,
    error,
    ...(machine ? { machine: { state: machine.state, legalEvents: machine.legalEvents } } : {}),
  };
}

function explainSummary(row: TaskRow, c: Circumstances): string {
  // Failed from outside (the dwell scanner) with compensations to run: see failure/failed-outside.ts.
  if ((row.status === 'pending' || row.status === 'waiting') && c.error !== null) {
    return `Failing: ${c.error} A worker serving "${row.workflow}" version ${row.workflowVersion} replays it and runs its compensations; then it ends failed.`;
  }
  if (row.status === 'running' && c.error !== null) {
    return `Failing: ${c.error} Its stalled run was fenced off; a worker serving "${row.workflow}" version ${row.workflowVersion} takes it over, replays it, runs its compensations, cancels its children, and ends it failed.`;
  }
  // A re-run that undoes first (see run/undo-rerun.ts).
  if ((row.status === 'pending' || row.status === 'running') && c.undoFrom !== null) {
    const who = row.status === 'pending' ? 'a worker serving' : `worker ${c.lease?.owner ?? '?'}, serving`;
    return `Re-run from step "${c.undoFrom}", undoing first: ${who} "${row.workflow}" version ${row.workflowVersion} replays the task and runs the compensations of the steps from "${c.undoFrom}" on, newest first; then the task runs again from there.`;
  }
  switch (row.status) {
    case 'pending': {
      if (row.debounceKey !== null && row.runs === 0 && row.runAt !== null && row.runAt > c.now) {
        return `Pending until ${at(row.runAt)}: a debounced task (key "${row.debounceKey}") waiting for its period to end; a start of "${row.workflow}" with the same key before then replaces its input and moves that time.`;
      }
      if (row.runAt !== null && row.runAt > c.now) return `Pending until ${at(row.runAt)} (delayed start).`;
      return unservedVersion(row, c, 'Pending') ?? dueSummary(row, c);
    }
    case 'running':
      if (c.lease?.expired)
        return `Running, but the lease of worker ${c.lease.owner} expired at ${at(c.lease.expiresAt)}: that worker is probably dead; another worker will reclaim the task.`;
      return `Running on worker ${c.lease?.owner ?? '?'} (lease until ${at(c.lease?.expiresAt ?? null)})${row.pauseRequested ? '; a pause is requested and takes effect at the next step boundary' : ''}.`;
    case 'waiting':
      // Its wait is over (an approval decided, an event delivered, a timer passed): it is due.
      if (row.runAt !== null && row.runAt <= c.now) {
        const head = `Waiting no more: its wait ended at ${at(row.runAt)}`;
        return unservedVersion(row, c, head) ?? `${head}; the next worker serving "${row.workflow}" version ${row.workflowVersion} with a free slot will resume it.`;
      }
      return waitingSummary(row, c);
    case 'paused':
      return 'Paused by a user: resume it to continue.';
    case 'cancelling':
      return cancellingSummary(row, c);
    case 'succeeded':
      return `Succeeded at ${at(row.finishedAt)}.`;
    case 'failed': {
      const cleanup = failedCleanup(row);
      if (cleanup?.cancelled) {
        return `Failed in its cleanup after a cancel${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}: ${c.error ?? 'unknown error'} A cancelled task is not retried: undo by hand what the error names, then start a new task if the work is still wanted.`;
      }
      if (cleanup) return `Failed, and its cleanup failed too: ${c.error ?? 'unknown error'} Undo by hand what the error names; retry it to run again from the failed step.`;
      return `Failed: ${c.error ?? 'unknown error'}. Retry it to run again from the failed step.`;
    }
    case 'cancelled':
      return `Cancelled${row.cancelReason ? `: ${row.cancelReason}` : ''}. A cancelled task never resumes.`;
  }
}

/** Why a due task cannot run (no live worker serves its workflow or its version), or null. */
function unservedVersion(row: TaskRow, c: Circumstances, head: string): string | null {
  if (c.live.includes(row.workflowVersion)) return null;
  const v = row.workflowVersion;
  if (!c.registered.length && !c.live.length) return `${head}, but no worker has ever registered workflow "${row.workflow}": start a worker that exports it.`;
  if (!c.live.length) {
    return `${head}, but no live worker serves "${row.workflow}" (workers registered version(s) ${list(c.registered)} before, and none of them is running now): start a worker with version ${v}.`;
  }
  return `${head}, but it was started under version ${v} of "${row.workflow}" and live workers serve only version(s) ${list(c.live)}: run a worker with version ${v}, or list it in compatibleVersions if the new code can replay it.`;
}

const list = (versions: string[]): string => [...new Set(versions)].join(', ');

/** A due pending task: what it waits for (its key at its limit, higher-priority work ahead) or the next free slot. */
function dueSummary(row: TaskRow, c: Circumstances): string {
  const q = c.queue;
  const parts: string[] = [];
  if (q && row.concurrencyKey !== null && row.concurrencyLimit !== null && q.keyLeased !== null) {
    const key = row.concurrencyKey.slice(row.workflow.length + 1);
    const limit = row.concurrencyLimit;
    if (q.keyLeased >= limit) parts.push(`its concurrency key "${key}" is at its limit (${q.keyLeased} of ${limit} running): it runs when one of them ends`);
    else if (q.keyAhead !== null && q.keyLeased + q.keyAhead >= limit) {
      parts.push(`its concurrency key "${key}" has ${q.keyAhead} task(s) queued before it (${q.keyLeased} of ${limit} running): it runs in its turn`);
    }
  }
  if (q && q.aheadByPriority > 0) parts.push(`${q.aheadByPriority} due task(s) of higher priority go first (its priority ${row.priority} counts as ${row.priority} s of waiting)`);
  if (parts.length) return `Pending and due, but waiting: ${parts.join('; ')}.`;
  return `Pending and due: the next worker serving "${row.workflow}" with a free slot will claim it.`;
}

/** The summary of a state machine's task: its state first, and what it waits for in the machine's words. */
function machineSummary(row: TaskRow, m: MachineInfo, wait: Record<string, unknown> | null, summary: string): string {
  if (m.legalEvents.length) {
    const until = typeof wait?.until === 'number' ? `; at ${new Date(wait.until).toISOString()} its timeout moves it on` : '';
    return `In state "${m.state}", waiting for one of its events: ${m.legalEvents.join(', ')}${until}. Send one with engine.send / \`stepwise send ${row.id} <event>\`.`;
  }
  if (row.status === 'running') return `In state "${m.state}" (its entry action runs, or it moves on): it takes events once it waits. ${summary}`;
  return `In state "${m.state}". ${summary}`;
}

/** The prefix of the signal a child task's end sends its parent. */
const CHILD_END = childEndSignal('');

/** What a waiting task waits for. */
function waitingSummary(row: TaskRow, c: Circumstances): string {
  const w = c.wait ?? {};
  const until = (t: unknown): string => (typeof t === 'number' ? ` until ${at(t)}` : '');
  const one = (x: Record<string, unknown>): string => {
    if (x.kind === 'event') {
      const list = Array.isArray(x.events) ? (x.events as string[]) : [String(x.event)];
      // The end of a child task is a signal `child:<id>` (see primitives/child.ts).
      if (list.every((e) => e.startsWith(CHILD_END))) return `the end of child task ${list.map((e) => e.slice(CHILD_END.length)).join(' or ')}`;
      return `event ${list.map((e) => `"${e}"`).join(' or ')}${until(x.until) || ' (no timeout)'}`;
    }
    if (x.kind === 'approval') {
      const who = Array.isArray(x.approvers) && x.approvers.length ? (x.approvers as string[]).join(', ') : 'anyone';
      return `approval "${String(x.name)}" (${String(x.approval)}, level ${String(x.level ?? 1)}) from ${who}${until(x.until) || ' (no deadline)'}; decide with \`stepwise approve ${String(x.approval)} --as <name>\` or \`stepwise reject …\``;
    }
    if (x.kind === 'retry') return `the retry of step "${String(x.step)}" (attempt ${String(x.attempt)})${until(x.until)}`;
    if (x.kind === 'sleep') return `the end of sleep "${String(x.step)}"${until(x.until)}`;
    if (x.kind === 'rate-limit') {
      const key = typeof x.key === 'string' && x.key ? ` for key "${x.key}"` : '';
      return `capacity in rate limit "${String(x.limit)}"${key}: the window is full; step "${String(x.step)}" holds a draw placed when capacity returns, at ${at(typeof x.until === 'number' ? x.until : null)}, and the task parks until then (no worker slot held)`;
    }
    return `its wake-up time${until(row.runAt)}`;
  };
  const signalled = (x: Record<string, unknown>): boolean => x.kind === 'event' && !String(x.event ?? (x.events as string[] | undefined)?.[0] ?? '').startsWith(CHILD_END);
  const hint = (list: Array<Record<string, unknown>>): string => (list.some(signalled) ? '; send events with engine.signal / `stepwise signal`' : '');
  if (w.kind === 'several' && Array.isArray(w.waits)) {
    const list = w.waits as Array<Record<string, unknown>>;
    return `Waiting for the first of: ${list.map(one).join('; ')}${hint(list)}.`;
  }
  return `Waiting for ${one(w)}${hint([w])}.`;
}

/** Who runs a cancelling task's cleanup, and what happens if no one does. */
function cancellingSummary(row: TaskRow, c: Circumstances): string {
  if (!c.lease) {
    // Cancelled while no worker held it (waiting, paused, pending), with cleanup to run.
    const fallback = `if none takes it within a lease period, any worker's heartbeat ends it cancelled without running that cleanup`;
    const head = `Cancelling${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}: waiting for a worker serving "${row.workflow}" version ${row.workflowVersion} to run its cleanup (onCancel handlers, compensations)`;
    if (!c.live.includes(row.workflowVersion)) return `${head}; no live worker serves that version now; ${fallback}.`;
    return `${head}; ${fallback}.`;
  }
  if (c.lease.expired) {
    const dead = `Cancelling${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}, but the lease of worker ${c.lease.owner} expired at ${at(c.lease.expiresAt)}: that worker is probably dead`;
    const fallback = `once the lease has been expired for a further lease period, any worker's heartbeat ends the task cancelled without running its cleanup (onCancel handlers, compensations)`;
    if (!c.live.includes(row.workflowVersion)) {
      return `${dead}; no live worker serves version ${row.workflowVersion} of "${row.workflow}", so none can take it over and finish its cleanup: ${fallback}, unless a worker with that version starts first.`;
    }
    return `${dead}; a worker serving "${row.workflow}" version ${row.workflowVersion} with a free slot takes it over and finishes its cleanup; if none does, ${fallback}.`;
  }
  return `Cancelling: worker ${c.lease.owner} has been told to stop the run and runs its cleanup${row.cancelReason ? ` (reason: ${row.cancelReason})` : ''}.`;
}
