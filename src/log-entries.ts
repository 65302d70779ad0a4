/**
 * @module log-entries
 * Internal: not part of the public API (the package exports only its index modules).
 * The stored form of the task event log: the `type` and JSON `data` of each kind of entry, built in
 * one place for the engine (transitions it plans) and for the stores (the entries they derive from
 * journal rows, signals, claims and lease expiry). `src/task-events.ts` reads them back as the
 * public {@link TaskEvent} union.
 *
 * JSON texts that are already JSON (a step's output, an error, a signal's payload) are embedded as
 * they are, not parsed and encoded again, so that writing an entry costs a string concatenation.
 */
import type { ActorKind, EventRow, NewEvent, StepRow, TransitionWrite } from './store.ts';

/** Entry types. Step entries are `step:<journal status>`. */
export const EVENT_TYPES = Object.freeze({
  transition: 'transition',
  stepCompleted: 'step:completed',
  stepFailed: 'step:failed',
  stepRetrying: 'step:retrying',
  stepWaiting: 'step:waiting',
  stepsForgotten: 'step:forgotten',
  signalReceived: 'signal:received',
  signalConsumed: 'signal:consumed',
  /** A model call's attempt (see `src/ai/meter.ts`). */
  usageAttempt: 'usage:attempt',
} as const);

const raw = (json: string | null): string => (json === null ? 'null' : json);
const str = (s: string | null | undefined): string => (s === null || s === undefined ? 'null' : JSON.stringify(s));

/**
 * A lifecycle transition: `{ event, from, to, epoch?, detail?, output?, error? }`. `detail`,
 * `output` and `error` are JSON texts (omitted when null).
 */
export function transitionEntry(
  actorKind: ActorKind,
  actorId: string,
  t: { event: string; from: string | null; to: string; epoch?: number | null; detail?: string | null; output?: string | null; error?: string | null },
): NewEvent {
  let data = `{"event":${str(t.event)},"from":${str(t.from)},"to":${str(t.to)}`;
  if (t.epoch !== undefined && t.epoch !== null) data += `,"epoch":${t.epoch}`;
  if (t.detail) data += `,"detail":${t.detail}`;
  if (t.output !== undefined && t.output !== null) data += `,"output":${t.output}`;
  if (t.error) data += `,"error":${t.error}`;
  return { type: EVENT_TYPES.transition, actorKind, actorId, data: `${data}}` };
}

/**
 * Whether a journal row carries its own log entry: a step's result (completed or failed) is the
 * last state of its row, so the row itself holds the entry's seq (`log_seq`) and the log reads the
 * entry from the row. This keeps a checkpoint at one row written, the engine's performance budget.
 * A row that will be written again (a wait in progress, a retry due) gets an entry of its own, and
 * so does a carried row before a retry deletes or rewrites it, so the log stays append-only.
 */
export function journalCarries(s: StepRow): boolean {
  return s.status === 'completed' || s.status === 'failed';
}

/**
 * The types of the entries journal rows carry (step results). One of these stored on its own was
 * moved there from its row, before a retry deleted or rewrote the row: the log of every task (the
 * stores' `readLog`) delivered it with the row and does not read it again.
 */
export const RESULT_ENTRY_TYPES: readonly string[] = [EVENT_TYPES.stepCompleted, EVENT_TYPES.stepFailed];

/** {@link RESULT_ENTRY_TYPES} as an SQL list of literals. */
export const RESULT_ENTRY_TYPES_SQL = RESULT_ENTRY_TYPES.map((t) => `'${t}'`).join(', ');

/** A journal row written: its type is `step:<status>`, its data the row (without the task id). */
export function stepEntry(actorKind: ActorKind, actorId: string, s: StepRow): NewEvent {
  return {
    type: `step:${s.status}`,
    actorKind,
    actorId,
    data:
      `{"seq":${s.seq},"name":${str(s.name)},"kind":${str(s.kind)},"status":${str(s.status)},"output":${raw(s.output)},` +
      `"error":${raw(s.error)},"attempts":${s.attempts},"startedAt":${s.startedAt ?? 'null'},"finishedAt":${s.finishedAt ?? 'null'},` +
      `"wakeAt":${s.wakeAt ?? 'null'},"epoch":${s.epoch},"done":${s.done ?? 'null'},"calledAfter":${s.calledAfter ?? 'null'},"businessKey":${s.businessKey === null ? 'null' : str(s.businessKey)}}`,
  };
}

/** Journal positions deleted (a retry forgets what followed the failed step). */
export function forgottenEntry(actorKind: ActorKind, actorId: string, seqs: readonly number[]): NewEvent {
  return { type: EVENT_TYPES.stepsForgotten, actorKind, actorId, data: `{"seqs":[${seqs.join(',')}]}` };
}

/** A signal recorded for the task. */
export function signalReceivedEntry(actorKind: ActorKind, actorId: string, s: { signalId: number; name: string; payload: string | null; idempotencyKey: string | null }): NewEvent {
  return {
    type: EVENT_TYPES.signalReceived,
    actorKind,
    actorId,
    data: `{"signalId":${s.signalId},"name":${str(s.name)},"payload":${raw(s.payload)},"idempotencyKey":${str(s.idempotencyKey)}}`,
  };
}

/** A signal consumed by the event wait at journal position `seq`. */
export function signalConsumedEntry(actorKind: ActorKind, actorId: string, c: { signalId: number; seq: number }): NewEvent {
  return { type: EVENT_TYPES.signalConsumed, actorKind, actorId, data: `{"signalId":${c.signalId},"seq":${c.seq}}` };
}

/**
 * When a journal write happened, for its `step:*` entry: a StepWrite carries no time of its own,
 * so it is the row's finish time, or a wait's start, or else the wall clock.
 */
export function stepEntryAt(s: StepRow): number {
  return s.finishedAt ?? (s.status === 'waiting' ? s.startedAt : null) ?? Date.now();
}

/** The last write of each (taskId, seq) wins, as a sequence of upserts would. */
export function uniqueSteps(steps: readonly StepRow[]): readonly StepRow[] {
  if (steps.length < 2) return steps;
  const byKey = new Map<string, StepRow>();
  for (const s of steps) byKey.set(`${s.taskId}\u0000${s.seq}`, s);
  return [...byKey.values()];
}

/** The first consumer of each signal wins, as a sequence of guarded updates would. */
export function uniqueConsumes(consume: readonly { signalId: number; seq: number }[]): Array<{ signalId: number; seq: number }> {
  const byId = new Map<number, { signalId: number; seq: number }>();
  for (const c of consume) if (!byId.has(c.signalId)) byId.set(c.signalId, c);
  return [...byId.values()];
}

/**
 * Every entry a transition write appends, in order: one `step:<status>` per journal row written,
 * one `step:forgotten` for deleted positions, one `signal:consumed` per consumed signal, then the
 * engine's `log` (the transition itself last). Derived entries take the actor of the first `log` entry (else the write's
 * worker, else an anonymous user).
 */
export function transitionWriteEntries(w: TransitionWrite): NewEvent[] {
  const first = w.log[0];
  const kind: ActorKind = first ? first.actorKind : w.workerId ? 'worker' : 'user';
  const id = first ? first.actorId : (w.workerId ?? 'anonymous');
  // What the run did comes before the transition that ends it: the last step, then `complete`.
  const out: NewEvent[] = [];
  // A carried entry is stored by its row (the log reads it from there): no JSON is built for it.
  for (const s of uniqueSteps(w.steps ?? [])) {
    out.push(journalCarries(s) ? { type: `step:${s.status}`, actorKind: kind, actorId: id, data: null, carriedBy: s.seq } : stepEntry(kind, id, s));
  }
  if (w.deleteSteps?.length) out.push(forgottenEntry(kind, id, w.deleteSteps));
  for (const c of uniqueConsumes(w.consume ?? [])) out.push(signalConsumedEntry(kind, id, c));
  out.push(...w.log);
  return out;
}

/** A journal row that carries an entry, with that entry's seq. */
export interface CarriedRow {
  step: StepRow;
  logSeq: number;
}

/**
 * The worker that took each lease epoch, from a task's claim and reclaim entries: the writer of
 * that epoch's journal rows, and so the actor of the entries they carry.
 */
export function claimersOf(transitions: Iterable<{ actorKind: string; actorId: string; data: string | null }>): Map<number, string> {
  const out = new Map<number, string>();
  for (const t of transitions) {
    if (t.actorKind !== 'worker' || !t.data) continue;
    const data = JSON.parse(t.data) as { event?: string; epoch?: number };
    if ((data.event === 'claim' || data.event === 'reclaim') && typeof data.epoch === 'number') out.set(data.epoch, t.actorId);
  }
  return out;
}

/**
 * A task's log from its two places, in seq order, at most `limit` entries: the entries of their
 * own, and those carried by journal rows (a step's result), read back as the same kind of row.
 */
export function mergeLog(taskId: string, own: readonly EventRow[], carried: readonly CarriedRow[], claimers: ReadonlyMap<number, string>, limit?: number): EventRow[] {
  const fromRows: EventRow[] = carried.map(({ step, logSeq }) => {
    const entry = stepEntry('worker', claimers.get(step.epoch) ?? 'unknown', step);
    return { taskId, seq: logSeq, at: stepEntryAt(step), type: entry.type, actorKind: 'worker', actorId: entry.actorId, data: entry.data };
  });
  const all = [...own, ...fromRows].sort((a, b) => a.seq - b.seq);
  return limit === undefined ? all : all.slice(0, limit);
}
