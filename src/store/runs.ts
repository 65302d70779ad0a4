/**
 * @module store/runs
 * What a run writes besides its journal: progress notes, usage with its log entries, and stream chunks of model output.
 */
import type { NewEvent } from './log.ts';

/** Log entries of a run that go with no journal row (see {@link Store.appendRunEvents}). */
export interface RunEventsWrite {
  taskId: string;
  epoch: number;
  at: number;
  events: readonly NewEvent[];
  /** The new `usage` column (JSON text). */
  usage: string;
}

/** Partial output of a streaming step while it streams: text deltas, or a retried attempt's reset frame. */
export interface StreamChunkRow {
  /** Orders a task's chunks (resume after the last one seen). */
  id: number;
  taskId: string;
  step: string;
  attempt: number;
  kind: 'delta' | 'reset';
  delta: string;
  at: number;
}

export interface ChunksWrite {
  taskId: string;
  epoch: number;
  chunks: ReadonlyArray<Omit<StreamChunkRow, 'id' | 'taskId'>>;
}

/** Writes of a run, fenced by its lease. */
export interface RunStore {
  /**
   * Records the progress a run reports (JSON text), only while the task is leased at `epoch`; no
   * log entry, no status change. Returns whether it was written.
   */
  setProgress(taskId: string, epoch: number, progress: string): Promise<boolean>;

  /**
   * Appends `events` to the task's log written by the run leased at `epoch` (model usage of an
   * attempt), and sets the task's `usage` column to `usage`, in one transaction; refused (false)
   * once the task is no longer leased at that epoch.
   */
  appendRunEvents(write: RunEventsWrite): Promise<boolean>;

  /**
   * Stream chunks of a streaming step (see `StreamChunkRow`): appended only while the task is
   * leased at `epoch` (false otherwise); read after an id; deleted per step once its stream ended
   * (when frames are kept only while their step streams), or with their task once it has ended.
   */
  appendChunks(write: ChunksWrite): Promise<boolean>;
  getChunks(taskId: string, after: number, limit: number): Promise<StreamChunkRow[]>;
  deleteChunks(taskId: string, step: string): Promise<void>;
  /** Deletes up to `limit` chunks of tasks that ended (succeeded, failed, cancelled) at or before `endedBefore`; returns how many. */
  purgeChunks(endedBefore: number, limit: number): Promise<number>;
}
