/**
 * @module approvals/request
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.approval(name, options)`, a primitive of the run (see `run/call.ts`), also usable by other
 * engine internals through {@link requestApproval}. The first time the call runs it creates the
 * approval record (fenced by the run's lease; a resumed run finds the same record by its call key,
 * so a crash never asks twice), then waits like an event wait: the task parks (`waiting`, no
 * worker slot held) until the deadline or the next reminder, or until `engine.decide` settles the
 * approval and records its wake-up signal (`approval:<id>`, which only the engine sends).
 * Passed deadlines and due reminders are handled by whichever run of the task sees them, with a
 * compare-and-set on the record, so a decision racing a timeout has exactly one winner. The
 * record is the truth: the signal only says "look again".
 */
import { InvalidArgumentError, LeaseLostError, StoreUnavailableError, coerceError } from '../errors.ts';
import { newId } from '../ids.ts';
import { decodeJson } from '../serialize.ts';
import { encodeWithin } from '../limits.ts';
import type { ApprovalRow, ApprovalUpdate, StepKind, StepRow } from '../store.ts';
import { call, type Primitive } from '../run/call.ts';
import type { Run } from '../run/run.ts';
import type { Activity } from '../run/activity.ts';
import { journalRow, type Position } from '../run/identity.ts';
import { haltReason, throwIfHalted } from '../run/state.ts';
import { waitFor } from '../run/waits.ts';
import { POLICY_ACTOR, decidedEntry, escalatedEntry, remindedEntry, requestedEntry } from './entries.ts';
import { TASK_ENDED_ACTOR, endedOutcome } from './closer.ts';
import { notice } from './info.ts';
import { isOpen, nextReminder, onDeadline, resolveOptions, wakeName, type StoredOptions } from './policy.ts';
import type { ApprovalDecision, ApprovalNotice, ApprovalOptions } from './types.ts';

interface ApprovalCall {
  pos: Position;
  name: string;
  approvers: string[];
  quorum: number;
  payload: string | null;
  stored: StoredOptions;
}

/** The journal output of a settled approval: its id and what the code received. */
interface Recorded {
  approvalId: string;
  decision: ApprovalDecision;
}

/** A store call of the run, tried a few times; a store that stays away stops the run (it resumes later). */
async function storeCall<T>(run: Run, what: string, fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      throwIfHalted(run.state);
      if (attempt >= 5) {
        run.lose('store', () => new StoreUnavailableError(`Could not ${what} for task ${run.taskId}: ${coerceError(e).message}`, { cause: e }));
        throw haltReason(run.state);
      }
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

function leaseLost(run: Run): never {
  run.lose('lease', () => new LeaseLostError(run.taskId, run.epoch));
  throw haltReason(run.state);
}

/** Tells observers (through the worker's events) about a change of an approval. */
async function tell(run: Run, kind: ApprovalNotice['kind'], row: ApprovalRow): Promise<void> {
  if (!run.deps.hears('approval:notice')) return;
  const first = await run.deps.store.getEvents(run.taskId, 0, 1).catch(() => []);
  const startedBy = first[0] ? { kind: first[0].actorKind, id: first[0].actorId } : null;
  run.deps.emit('approval:notice', notice(kind, row, startedBy));
}

const APPROVAL: Primitive<string, ApprovalOptions, ApprovalCall, ApprovalDecision> = {
  kind: 'event',
  replayed: (rec) => (decodeJson(rec.output) as Recorded).decision,
  prepare(run, pos, name, options) {
    try {
      const { approvers, quorum, stored } = resolveOptions(name, options);
      const payload = encodeWithin(options.payload, `The payload of approval "${name}"`, run.deps.outputBytes, 'outputBytes');
      return { pos, name, approvers, quorum, payload, stored };
    } catch (e) {
      throw run.fail(coerceError(e));
    }
  },
  async start(run, c, activity) {
    const { seq, stepId, recorded } = c.pos;
    const site: ApprovalSite = { seq, stepId, recorded, kind: 'event', callKey: `${stepId}@${run.task.retries}` };
    const { approvalId, decision, consume, base } = await awaitApproval(run, c, site, activity);
    const output: Recorded = { approvalId, decision };
    return run.writer.complete({ ...base, status: 'completed', output: JSON.stringify(output), finishedAt: run.deps.clock.now() }, () => decision, consume);
  },
};

/**
 * Where an approval waits in the journal: the position of the call that asked (its own event row
 * for `ctx.approval`; the row of a step that parks on a person's decision), the kind of that row,
 * the record's call key (unique per task), and further columns of the waiting row.
 */
export interface ApprovalSite {
  seq: number;
  stepId: string;
  recorded: StepRow | undefined;
  kind: StepKind;
  callKey: string;
  fields?: Partial<StepRow>;
  /** Stored beside the approval id in the waiting row's output (`ask`): what the step waits for. */
  tag?: string;
}

/** What a settled approval hands the call that waited: the signal to consume with the row it writes. */
export interface SettledApproval {
  approvalId: string;
  decision: ApprovalDecision;
  consume: { signalId: number; seq: number } | undefined;
  /** The waiting row (its kind and fields), for the row that records the outcome. */
  base: StepRow;
}

/**
 * Waits for an approval at `site` without recording its outcome: the caller writes the row that
 * does (with `consume`), so a step can park on a person's decision at its own journal position.
 * The waiting row's output is `{ approvalId }`; a resumed run finds the record through it.
 */
export function awaitApprovalAt(run: Run, site: ApprovalSite, name: string, options: ApprovalOptions, activity: Activity): Promise<SettledApproval> {
  let c: ApprovalCall;
  try {
    const { approvers, quorum, stored } = resolveOptions(name, options);
    const payload = encodeWithin(options.payload, `The payload of approval "${name}"`, run.deps.outputBytes, 'outputBytes');
    c = { pos: { name, occurrence: 1, seq: site.seq, stepId: site.stepId, recorded: site.recorded }, name, approvers, quorum, payload, stored };
  } catch (e) {
    return Promise.reject(run.fail(coerceError(e)));
  }
  return awaitApproval(run, c, site, activity);
}

/**
 * The approval record of this call: the one the waiting row names (a run resumed from a park), or
 * a new one requested now. A retried task is asked again: an approval of an earlier try that
 * nobody decided before the task ended is closed (if no closer did it yet) and a new one requested.
 */
async function findOrRequest(run: Run, c: ApprovalCall, site: ApprovalSite): Promise<ApprovalRow> {
  const { clock, store } = run.deps;
  const now = clock.now();
  const fresh: ApprovalRow = {
    id: `apv_${newId(now)}`,
    taskId: run.taskId,
    workflow: run.workflow.name,
    name: c.name,
    // The retry count keeps a task retried after forgetting this call from reusing a decided record.
    callKey: site.callKey,
    status: 'pending',
    approvers: JSON.stringify(c.approvers),
    quorum: c.quorum,
    payload: c.payload,
    policy: JSON.stringify(c.stored),
    deadline: c.stored.timeoutMs === null ? null : now + c.stored.timeoutMs,
    remindAt: c.stored.remindEveryMs === null ? null : now + c.stored.remindEveryMs,
    level: 1,
    decisions: '[]',
    outcome: null,
    version: 1,
    createdAt: now,
    decidedAt: null,
  };
  const recorded = site.recorded;
  // A run resumed from a park knows its approval from the waiting row: a read, not a write.
  const known = recorded?.status === 'waiting' && recorded.output ? (decodeJson(recorded.output) as { approvalId?: string } | null)?.approvalId : undefined;
  const found = known ? await storeCall(run, `read approval ${known}`, () => store.getApproval(known)) : null;
  if (found && !(found.callKey !== fresh.callKey && (isOpen(found.status) || endedBy(found)))) return found;
  if (found && isOpen(found.status)) await closeForRetry(run, found);
  const inserted = await storeCall(run, `record approval "${c.name}"`, () =>
    store.insertApproval({ approval: fresh, epoch: run.epoch, at: now, log: [requestedEntry(fresh, { kind: 'worker', id: run.deps.workerId })] }),
  );
  if (!inserted) leaseLost(run);
  if (inserted.created) await tell(run, 'requested', inserted.approval);
  return inserted.approval;
}

async function awaitApproval(run: Run, c: ApprovalCall, site: ApprovalSite, activity: Activity): Promise<SettledApproval> {
  const { clock, store } = run.deps;
  const { seq, stepId, recorded } = site;
  // Asking a person is a side effect: every result the code received is durable first.
  await run.writer.flush();
  throwIfHalted(run.state);
  let row: ApprovalRow = await findOrRequest(run, c, site);
  const stored = JSON.parse(row.policy) as StoredOptions;
  const signal = wakeName(row.id);
  const base = journalRow(run, seq, stepId, site.kind, {
    ...site.fields,
    status: 'waiting',
    startedAt: site.fields?.startedAt ?? recorded?.startedAt ?? row.createdAt,
    wakeAt: null,
    output: JSON.stringify({ approvalId: row.id, ...(site.tag ? { ask: site.tag } : {}) }),
  });
  const id = row.id;
  const reread = async (): Promise<ApprovalRow> => (await storeCall(run, `read approval ${id}`, () => store.getApproval(id))) ?? row;
  /** A guarded change by this run; on a lost race, the record as it is now (a decision came first). */
  const change = async (w: Omit<ApprovalUpdate, 'id' | 'version' | 'epoch'>): Promise<ApprovalRow | null> => {
    const done = await storeCall(run, `update approval ${row.id}`, () => store.updateApproval({ ...w, id: row.id, version: row.version, epoch: run.epoch }));
    if (done) return done;
    const now = await reread();
    if (now.version === row.version) leaseLost(run); // the record did not move: the fence refused the write
    row = now;
    return null;
  };
  for (;;) {
    throwIfHalted(run.state);
    if (!isOpen(row.status)) return settle(run, base, row, signal);
    const t = clock.now();
    if (row.deadline !== null && t >= row.deadline) {
      const next = onDeadline(row, stored, t);
      const entry =
        next.kind === 'escalated'
          ? escalatedEntry(row, { level: row.level + 1, approvers: next.approvers, added: next.added, deadline: next.set.deadline ?? null })
          : decidedEntry(row, next.outcome, next.set.status as string, POLICY_ACTOR(next.policy));
      const updated = await change({ set: next.set, at: t, log: [entry] });
      if (updated) {
        row = updated;
        await tell(run, next.kind === 'escalated' ? 'escalated' : 'decided', row);
      }
      continue;
    }
    if (row.remindAt !== null && stored.remindEveryMs !== null && t >= row.remindAt) {
      const next = nextReminder(row.remindAt, stored.remindEveryMs, t);
      const updated = await change({ set: { remindAt: next }, at: t, log: [remindedEntry(row, next)] });
      if (updated) {
        row = updated;
        await tell(run, 'reminded', row);
      }
      continue;
    }
    // News of a signal that came while no wait was registered is read first.
    while (run.signalNews) await run.fetchSignals().catch(() => false);
    if (run.signals.some((s) => s.name === signal)) {
      row = await reread();
      if (!isOpen(row.status)) continue;
    }
    const times = [row.deadline, row.remindAt].filter((x): x is number => x !== null);
    const wakeAt = times.length ? Math.min(...times) : null;
    const approvers = JSON.parse(row.approvers) as string[];
    await waitFor(
      run,
      {
        row: { ...base, wakeAt },
        wakeAt,
        events: [signal],
        describe: { kind: 'approval', step: stepId, approval: row.id, name: row.name, approvers, level: row.level, until: row.deadline },
      },
      activity,
    );
    throwIfHalted(run.state);
    row = await reread();
  }
}

/** Whether the approval was closed undecided because its task ended. */
function endedBy(row: ApprovalRow): boolean {
  return row.status === 'expired' && row.outcome !== null && (JSON.parse(row.outcome) as Partial<ApprovalDecision>).taskEnded !== undefined;
}

/** Closes an earlier try's open approval (see `approvals/closer.ts`), fenced by this run's lease. */
async function closeForRetry(run: Run, row: ApprovalRow): Promise<void> {
  const at = run.deps.clock.now();
  const outcome = endedOutcome(row, 'failed');
  const closed = await storeCall(run, `close approval ${row.id}`, () =>
    run.deps.store.updateApproval({
      id: row.id,
      version: row.version,
      epoch: run.epoch,
      at,
      set: { status: 'expired', outcome: JSON.stringify(outcome), decidedAt: at },
      log: [decidedEntry(row, outcome, 'expired', TASK_ENDED_ACTOR)],
    }),
  );
  // Refused: decided or closed meanwhile (it stays as it is), or this run lost its lease.
  if (!closed) {
    const now = await storeCall(run, `read approval ${row.id}`, () => run.deps.store.getApproval(row.id));
    if (now && now.version === row.version) leaseLost(run);
  }
}

/** The outcome, with the wake-up signal to consume with the row that records it. */
async function settle(run: Run, base: StepRow, row: ApprovalRow, signal: string): Promise<SettledApproval> {
  const decision = JSON.parse(row.outcome as string) as ApprovalDecision;
  const find = (): number => run.signals.findIndex((s) => s.name === signal);
  // A decision (or a timeout policy applied by one) recorded a signal; read it if this run has not yet, so it is consumed.
  if (find() < 0) await run.fetchSignals().catch(() => false);
  const index = find();
  const consumed = index >= 0 ? run.takeSignal(index) : undefined;
  return { approvalId: row.id, decision, consume: consumed ? { signalId: consumed.id, seq: base.seq } : undefined, base };
}

/**
 * Asks for an approval from within a run: `ctx.approval` for workflow code, and the entry point for
 * engine internals that park a task on a person's decision. `callName` is the journal name of the
 * call (default `approval:<name>`, apart from the names of steps and event waits).
 */
export function requestApproval(run: Run, name: string, options: ApprovalOptions = {}, callName = `approval:${name}`): Promise<ApprovalDecision> {
  if (typeof name !== 'string' || !name || name.length > 190) {
    return Promise.reject(run.fail(new InvalidArgumentError(`ctx.approval: ${JSON.stringify(name)} is not an approval name (1-190 characters).`)));
  }
  return call(run, APPROVAL, callName, name, options);
}
