/**
 * @module stream-frames
 * Frames of streaming steps as readers see them (`engine.events({ taskId, streams: true })` and
 * `streamEvents` of `stepwise-engine/ai`): a step's text deltas while it streams, and a reset
 * when a retried attempt starts over. Stored as rows of the chunk table while the stream runs
 * (see `ai/stream-chunks.ts`); a finished stream's rows are deleted, its text is the step's output.
 */
import type { StreamChunkRow } from './store.ts';

/** A frame of a streaming step: text it streamed, or a reset when a retried attempt starts over. */
export interface StreamEvent {
  type: 'stream:delta' | 'stream:reset';
  taskId: string;
  /** The step id. */
  step: string;
  attempt: number;
  /** Orders a task's frames (its own sequence, apart from the log's `seq`): resume after the last one seen. */
  seq: number;
  /** The text (empty for a reset). */
  delta: string;
  at: number;
}

export function toStreamEvent(r: StreamChunkRow): StreamEvent {
  return { type: r.kind === 'reset' ? 'stream:reset' : 'stream:delta', taskId: r.taskId, step: r.step, attempt: r.attempt, seq: r.id, delta: r.delta, at: r.at };
}

export const isStreamEvent = (e: { type: string }): e is StreamEvent => e.type === 'stream:delta' || e.type === 'stream:reset';
