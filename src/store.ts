/**
 * @module store
 * The Store contract: what the engine needs from a database, in terms of rows and guarded writes.
 * A store knows SQL and nothing about workflows; the engine knows workflows and nothing about SQL.
 * JSON payloads (input, output, errors, details) travel as text and are never parsed here.
 *
 * Every status change is a {@link TransitionWrite}: the lifecycle module has already picked the
 * target status and the legal source statuses; the store re-checks them atomically
 * (`UPDATE … WHERE status IN (…) AND version = ?` or `AND epoch = ?`) and appends its log entries
 * in the same transaction. Worker writes are fenced by the lease epoch: a worker that lost its
 * lease (another worker claimed the task and bumped the epoch) gets its writes refused.
 *
 * The event log. Every write that changes a task appends its entries to the task's log in the
 * same transaction, numbered by `seq` (1, 2, … per task, no gaps, in commit order even under
 * concurrent writers of one task, from a counter on the task row). A step's result is carried by
 * its journal row (`log_seq`), not written twice: a checkpoint stays one row. Entries with
 * `carriedBy` name that row; before a write deletes or rewrites a carrying row, its entry is
 * stored on its own with the same seq, so the log stays append-only. Entries come from two places (formats in `log-entries.ts`):
 * - the engine: `TransitionWrite.log` (the transition's own entry), appended after what the
 *   store derives from the same write, so that a run's last step comes before its `complete`;
 * - the store, derived from what it writes, in this order: one
 *   `step:<status>` entry per journal row written (`stepEntry`), one `step:forgotten` entry for
 *   `deleteSteps` (`forgottenEntry`), one `signal:consumed` per consumed signal
 *   (`signalConsumedEntry`); a `signal:received` entry for a recorded signal
 *   (`signalReceivedEntry`, actor from the SignalWrite); and a `transition` entry for each task
 *   it claims (`claim` / `reclaim`, actor the worker, with the
 *   new epoch; a reclaim's detail names the previous owner) or moves on lease expiry (actor
 *   system `lease-expiry`). Derived step, forgotten and consumed entries take the actor of the
 *   write: the first `log` entry's, or for a StepWrite the worker holding the lease.
 *
 * The contract is grouped by capability, one interface per file of `store/` (tasks, journal, log,
 * runs, leases, signals, approvals, retention, workflows, wake-ups, idempotency, transactions,
 * key queues, …);
 * {@link Store} is their sum. A new capability adds a group, not members to one interface.
 */
import type { TaskStore } from './store/tasks.ts';
import type { JournalStore } from './store/journal.ts';
import type { LogStore } from './store/log.ts';
import type { RunStore } from './store/runs.ts';
import type { LeaseStore } from './store/leases.ts';
import type { SignalStore } from './store/signals.ts';
import type { ApprovalStore } from './store/approvals.ts';
import type { RetentionStore } from './store/retention.ts';
import type { WorkflowStore } from './store/workflows.ts';
import type { WakeStore } from './store/wake.ts';
import type { IdempotencyStore } from './store/idempotency.ts';
import type { TransactionStore } from './store/transactions.ts';
import type { ScheduleStore } from './store/schedules.ts';
import type { KeyedStartStore } from './store/keyed-starts.ts';
import type { RateLimitStore } from './store/rate-limits.ts';
import type { BlobStore } from './store/blobs.ts';
import type { AlertStore } from './store/alerts.ts';
import type { KeyQueueStore } from './store/key-queues.ts';

export type { TaskRow, StepKind, StepStatus, StepRow, SignalRow, TaskPatch } from './store/rows.ts';
export type { ActorKind, EventRow, NewEvent, EventRange, LogPage, LogAppend, LogPosition, LogStore } from './store/log.ts';
export type { WriteGuard, TransitionWrite, StepWrite, WriteOp, WriteResult, JournalStore, TaskHead, TaskEnd, TaskOutcome } from './store/journal.ts';
export { committedOf, isTaskEnd, isTaskHead, markCommitted } from './store/journal.ts';
export type { NewTask, ListQuery, QueuePosition, TagChange, TaskStore } from './store/tasks.ts';
export type { RunEventsWrite, StreamChunkRow, ChunksWrite, RunStore } from './store/runs.ts';
export type { ClaimRequest, ClaimedTask, HeartbeatRequest, HeldTask, ExpireRequest, NextRunRequest, LeaseStore } from './store/leases.ts';
export type { SignalWrite, SignalInsert, SignalStore } from './store/signals.ts';
export type { ApprovalStatus, ApprovalRow, ApprovalInsert, ApprovalPatch, ApprovalUpdate, ApprovalChange, ApprovalQuery, ApprovalStore } from './store/approvals.ts';
export type { TaskSelection, DeletedTask, DeletionNote, DeletionRecord, RetentionStore } from './store/retention.ts';
export type { WorkerPresence, WorkflowRegistration, WorkflowStore } from './store/workflows.ts';
export type { WakeReason, WakeEvent, WakeTopic, WakeStore } from './store/wake.ts';
export { topicOf } from './store/wake.ts';
export type { IdempotencyStore } from './store/idempotency.ts';
export type { ScheduleRow, ScheduleOverlap, ScheduleDefinition, ScheduleAdvance, ScheduleStore } from './store/schedules.ts';
export type { TransactionStore, TransactionCheckpoint } from './store/transactions.ts';
export type { DebounceWrite, SingletonAnswer, KeyedStartStore } from './store/keyed-starts.ts';
export type { RateDrawRequest, RateDraw, RateLimitStore } from './store/rate-limits.ts';
export type { BlobRow, BlobWrite, BlobTouch, BlobUsage, CollectedBlob, StoredBlob, BlobStore } from './store/blobs.ts';
export type { AlertRow, AlertQuery, AlertStore } from './store/alerts.ts';
export type { KeyQueueStore } from './store/key-queues.ts';

/** What the engine needs from a database: every capability group, and the store's own life. */
export interface Store
  extends
    TaskStore,
    JournalStore,
    LogStore,
    RunStore,
    LeaseStore,
    SignalStore,
    ApprovalStore,
    RetentionStore,
    WorkflowStore,
    WakeStore,
    IdempotencyStore,
    TransactionStore,
    ScheduleStore,
    KeyedStartStore,
    RateLimitStore,
    BlobStore,
    AlertStore,
    KeyQueueStore {
  readonly dialect: 'sqlite' | 'postgres';
  /** A printable description (no secrets). */
  readonly description: string;
  /** How many `writeBatch` calls a worker may have in flight at once (1 for a single connection). */
  readonly parallelWrites: number;
  /** Applies pending migrations; safe when several processes call it at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;
}
