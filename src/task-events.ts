/**
 * @module task-events
 * The task event log as users read it: `engine.get(id).history`, `engine.events()` and observers.
 * Every change of a task is one entry, appended in the same transaction as the change itself, with
 * a per-task sequence number (1, 2, 3…, no gaps, in commit order) and the actor that caused it.
 * A task's status, journal and outputs can be rebuilt from its log alone.
 */
import type { LifecycleEvent, TaskStatus } from './lifecycle.ts';
import type { SerializedError } from './serialize.ts';
import type { EventRow, StepRow } from './store.ts';
import type { AttemptUsage } from './task-events/usage.ts';
import { isApprovalEntry, toApprovalEvent, type ApprovalEvent } from './task-events/approval.ts';
import { toDwellEvent, type DwellEvent } from './task-events/dwell.ts';
import type { Actor } from './task-events/actor.ts';
import { DEBOUNCED_ENTRY, toDebouncedEvent, type DebouncedEvent } from './task-events/debounce.ts';

export type { Actor } from './task-events/actor.ts';

interface EventBase {
  taskId: string;
  /** 1, 2, 3… per task: pass the last one seen as `after` to resume a read. */
  seq: number;
  at: number;
  actor: Actor;
}

/**
 * A journal row as recorded by a step event (the row's state after the write): the journal's
 * columns, with the output and error decoded.
 */
export type StepRecord = Omit<StepRow, 'taskId' | 'output' | 'error'> & {
  output: unknown;
  error: SerializedError | null;
};

/** A status change (or a pause request, or a claim) through the lifecycle table. */
export interface TransitionEvent extends EventBase {
  type: 'transition';
  /** `create` for the task's creation; otherwise a lifecycle event. */
  event: LifecycleEvent | 'create';
  from: TaskStatus | null;
  to: TaskStatus;
  /** The lease epoch a claim or reclaim started. */
  epoch?: number;
  detail?: Record<string, unknown>;
  /** The task's output, on `complete`. */
  output?: unknown;
  /** The task's error, on `fail`. */
  error?: SerializedError;
}

/** A journal row written: a step completed, failed for good, will be retried, or a wait began. */
export interface StepEvent extends EventBase {
  type: 'step:completed' | 'step:failed' | 'step:retrying' | 'step:waiting';
  step: StepRecord;
}

/** Journal rows a retry deleted (what the code did after the failure it retries). */
export interface StepsForgottenEvent extends EventBase {
  type: 'step:forgotten';
  seqs: number[];
}

export interface SignalReceivedEvent extends EventBase {
  type: 'signal:received';
  signalId: number;
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
}

export interface SignalConsumedEvent extends EventBase {
  type: 'signal:consumed';
  signalId: number;
  /** The journal position (`StepRecord.seq`) of the event wait that received it. */
  position: number;
}

/**
 * One attempt of a model call (`stepwise-engine/ai`, or `ctx.usage`): its model, tokens and cost,
 * and how it ended — failed, cancelled and interrupted attempts are billed too.
 */
export interface UsageEvent extends EventBase {
  type: 'usage:attempt';
  usage: AttemptUsage;
}

/**
 * An idempotency record met by this task (by a step with a business key, or by
 * `engine.idempotency.run(…, { taskId })`): a hit (the stored result was returned instead of
 * running again), a conflict (the key was first used with other parameters), or a take-over of a
 * record whose owner's lease had run out.
 */
export interface IdempotencyTaskEvent extends EventBase {
  type: 'idempotency:hit' | 'idempotency:conflict' | 'idempotency:takeover';
  key: string;
  backend: string;
  /** The step that met it. */
  step?: string;
  /** A take-over: the owner whose lease ran out. */
  previousOwner?: string | null;
  /** A hit or conflict: the task that ran the operation first, if it ran in one. */
  ranByTask?: string | null;
}

/** An entry of a kind this version does not know (written by a newer version). */
export interface UnknownEvent extends EventBase {
  type: 'unknown';
  original: string;
  data: unknown;
}

/** One entry of a task's event log. */
export type TaskEvent =
  | TransitionEvent
  | StepEvent
  | StepsForgottenEvent
  | SignalReceivedEvent
  | SignalConsumedEvent
  | UsageEvent
  | IdempotencyTaskEvent
  | ApprovalEvent
  | DwellEvent
  | DebouncedEvent
  | UnknownEvent;
export type TaskEventType = TaskEvent['type'];

/** The public form of a stored entry. */
export function toTaskEvent(row: EventRow): TaskEvent {
  const base: EventBase = { taskId: row.taskId, seq: row.seq, at: row.at, actor: { kind: row.actorKind, id: row.actorId } };
  const data = (row.data === null ? {} : JSON.parse(row.data)) as Record<string, unknown>;
  switch (row.type) {
    case 'transition': {
      const e: TransitionEvent = { ...base, type: 'transition', event: data.event as TransitionEvent['event'], from: (data.from ?? null) as TaskStatus | null, to: data.to as TaskStatus };
      if (typeof data.epoch === 'number') e.epoch = data.epoch;
      if (data.detail !== undefined && data.detail !== null) e.detail = data.detail as Record<string, unknown>;
      if ('output' in data) e.output = data.output;
      if (data.error) e.error = data.error as SerializedError;
      return e;
    }
    case 'step:completed':
    case 'step:failed':
    case 'step:retrying':
    case 'step:waiting': {
      const s = data as unknown as StepRecord & { error: SerializedError | null };
      return {
        ...base,
        type: row.type,
        step: {
          seq: s.seq,
          name: s.name,
          kind: s.kind,
          status: s.status,
          output: s.output ?? undefined,
          error: s.error ?? null,
          attempts: s.attempts,
          startedAt: s.startedAt,
          finishedAt: s.finishedAt,
          wakeAt: s.wakeAt,
          epoch: s.epoch,
          done: s.done,
          calledAfter: s.calledAfter ?? null,
          businessKey: s.businessKey ?? null,
        },
      };
    }
    case 'step:forgotten':
      return { ...base, type: 'step:forgotten', seqs: (data.seqs ?? []) as number[] };
    case 'signal:received':
      return {
        ...base,
        type: 'signal:received',
        signalId: data.signalId as number,
        name: data.name as string,
        payload: data.payload ?? undefined,
        idempotencyKey: (data.idempotencyKey ?? null) as string | null,
      };
    case 'signal:consumed':
      return { ...base, type: 'signal:consumed', signalId: data.signalId as number, position: data.seq as number };
    case 'usage:attempt':
      return { ...base, type: 'usage:attempt', usage: data as unknown as AttemptUsage };
    case 'idempotency:hit':
    case 'idempotency:conflict':
    case 'idempotency:takeover': {
      const e: IdempotencyTaskEvent = { ...base, type: row.type, key: data.key as string, backend: data.backend as string };
      if (typeof data.step === 'string') e.step = data.step;
      if ('previousOwner' in data) e.previousOwner = (data.previousOwner ?? null) as string | null;
      if ('ranByTask' in data) e.ranByTask = (data.ranByTask ?? null) as string | null;
      return e;
    }
    default:
      if (isApprovalEntry(row.type)) return toApprovalEvent(base, row.type, data);
      if (row.type === 'dwell:exceeded') return toDwellEvent(base, data);
      if (row.type === DEBOUNCED_ENTRY) return toDebouncedEvent(base, data);
      return { ...base, type: 'unknown', original: row.type, data };
  }
}

/** What a task's log says about it: its status, output or error, and its journal. */
export interface RebuiltTask {
  status: TaskStatus | null;
  output: unknown;
  error: SerializedError | null;
  /** Journal rows by position, as the last step entry of each position left them. */
  steps: StepRecord[];
}

/**
 * Folds a task's log (oldest first) into its state: the last transition's status, the output of a
 * `complete`, the error of a `fail` (cleared by a `retry`), and the journal as step entries wrote
 * it, less what a retry forgot. For a complete log this equals the stored task.
 */
export function rebuildTask(events: Iterable<TaskEvent>): RebuiltTask {
  let status: TaskStatus | null = null;
  let output: unknown;
  let error: SerializedError | null = null;
  const steps = new Map<number, StepRecord>();
  for (const e of events) {
    switch (e.type) {
      case 'transition':
        status = e.to;
        if (e.event === 'complete') output = e.output;
        if (e.event === 'fail') error = e.error ?? null;
        if (e.event === 'retry') error = null;
        break;
      case 'step:completed':
      case 'step:failed':
      case 'step:retrying':
      case 'step:waiting':
        steps.set(e.step.seq, e.step);
        break;
      case 'step:forgotten':
        for (const seq of e.seqs) steps.delete(seq);
        break;
      default:
        break;
    }
  }
  return { status, output, error, steps: [...steps.values()].sort((a, b) => a.seq - b.seq) };
}
