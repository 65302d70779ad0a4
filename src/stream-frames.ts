/**
 * @module stream-frames
 * Frames of streaming steps as readers see them (`engine.events({ taskId, streams: true })` and
 * `streamEvents` of `stepwise-engine/ai`): a step's text deltas while it streams, and a reset
 * when a retried attempt starts over. Stored as rows of the chunk table while the stream runs
 * (see `ai/stream-chunks.ts`); a finished stream's rows are deleted, its text is the step's output.
 */
import { toMs, type Duration } from './duration.ts';
import { InvalidArgumentError } from './errors.ts';
import { checkOptionKeys } from './option-keys.ts';
import type { StreamChunkRow } from './store.ts';

/** How long the frames of streaming steps are kept (`new Engine({ streamFrames })`). */
export interface StreamFramesOptions {
  /**
   * `'task'`: a finished stream's frames stay until its task has ended (and `afterEnd` more), so a
   * reader that reconnects just after the step finished still replays them. `'step'`: they are
   * deleted as soon as the stream finishes (its text is the step's output), which keeps the chunk
   * table small for long-lived tasks such as chat sessions.
   * @defaultValue 'task'
   */
  keep?: 'task' | 'step';
  /** How long frames outlive their task's end before workers delete them. @defaultValue '10m' */
  afterEnd?: Duration;
}

export interface ResolvedStreamFrames {
  keep: 'task' | 'step';
  afterEndMs: number;
}

export const DEFAULT_FRAMES_AFTER_END_MS = 10 * 60_000;

/** Checks and resolves `new Engine({ streamFrames })`. */
export function resolveStreamFrames(options: StreamFramesOptions | undefined): ResolvedStreamFrames {
  checkOptionKeys(options, ['keep', 'afterEnd'], 'new Engine({ streamFrames })');
  const keep = options?.keep ?? 'task';
  if (keep !== 'task' && keep !== 'step') throw new InvalidArgumentError(`new Engine({ streamFrames }): keep is 'task' or 'step', got ${JSON.stringify(keep)}.`);
  const afterEndMs = options?.afterEnd === undefined ? DEFAULT_FRAMES_AFTER_END_MS : toMs(options.afterEnd, 'streamFrames.afterEnd');
  return { keep, afterEndMs };
}

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
