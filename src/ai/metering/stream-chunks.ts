/**
 * @module ai/metering/stream-chunks
 * Durable streams: the partial output of a streaming model step, readable live from any process
 * while the step streams (B10). The run writes each attempt's text deltas to the store's chunk
 * table as they arrive — coalesced: one write in flight at a time, the deltas that arrive during
 * it go in the next — after a reset frame when the attempt is a retry (readers drop what the step
 * streamed before). A finished stream's chunks stay until its task has ended (workers delete them
 * `streamFrames.afterEnd` later), so a reader that reconnects after the step still replays them;
 * with `streamFrames: { keep: 'step' }` they are deleted when the stream finishes (the stored
 * transcript is the step's final output in the journal).
 *
 * A reader ({@link streamEvents}) gets `{ step, attempt, seq, delta }` frames in order and resumes
 * after the last `seq` it saw.
 */
import type { RunCore } from '../../run/core.ts';
import type { Store } from '../../store.ts';
import { isFinished } from '../../lifecycle.ts';
import { toStreamEvent, type StreamEvent } from '../../stream-frames.ts';

export type { StreamEvent } from '../../stream-frames.ts';

declare module '../../run/run.ts' {
  interface RunServices {
    /** Whether a finished stream's frames are kept until its task ends ('task', the default) or deleted at once ('step'). */
    streamFrames?: 'task' | 'step' | undefined;
    /** Tells this process's readers that frames of the task were committed (they need not wait for their poll). */
    framesAppended?: ((taskId: string) => void) | undefined;
  }
}

export interface StreamEventsOptions {
  /** Resume after this frame. @defaultValue 0 (from the start) */
  after?: number;
  /** Only this step's frames. */
  step?: string;
  /** Keep waiting for frames until the task is finished (true), or end at the current end. @defaultValue true */
  follow?: boolean;
  signal?: AbortSignal;
  /** Between two reads without news. @defaultValue 100 */
  pollMs?: number;
}

/** Writes one attempt's deltas (see the module doc). */
export interface StreamWriter {
  write(delta: string): void;
  /** The stream finished: pending deltas are written (and the step's chunks deleted when frames are kept per step). */
  finish(): Promise<void>;
  /** The attempt ended otherwise: pending deltas are written and kept (a retry resets them). */
  close(): Promise<void>;
}

export function openStream(run: RunCore, step: string, attempt: number): StreamWriter {
  const store = run.deps.store;
  const clock = run.deps.clock;
  let pending: Array<{ kind: 'delta' | 'reset'; delta: string }> = attempt > 1 ? [{ kind: 'reset', delta: '' }] : [];
  let inFlight: Promise<void> | null = null;
  let refused = false;
  const flush = (): void => {
    if (inFlight || !pending.length || refused) return;
    // Consecutive deltas travel as one row.
    const batch: Array<{ kind: 'delta' | 'reset'; delta: string }> = [];
    for (const p of pending) {
      const last = batch[batch.length - 1];
      if (last && last.kind === 'delta' && p.kind === 'delta') last.delta += p.delta;
      else batch.push({ ...p });
    }
    pending = [];
    const at = clock.now();
    inFlight = store.appendChunks({ taskId: run.taskId, epoch: run.epoch, chunks: batch.map((b) => ({ step, attempt, kind: b.kind, delta: b.delta, at })) }).then(
      (ok) => {
        if (!ok)
          refused = true; // the lease moved on: the new owner streams now
        else run.deps.framesAppended?.(run.taskId);
        inFlight = null;
        flush();
      },
      () => {
        // A failed write loses these deltas for live readers only; the final text is the journal's.
        inFlight = null;
        flush();
      },
    );
  };
  const drain = async (): Promise<void> => {
    flush();
    while (inFlight) await inFlight;
  };
  if (pending.length) flush();
  return {
    write(delta) {
      pending.push({ kind: 'delta', delta });
      flush();
    },
    async finish() {
      await drain();
      if (run.deps.streamFrames === 'step') await store.deleteChunks(run.taskId, step);
    },
    close: drain,
  };
}

/**
 * The frames of a task's streaming steps, live: in order, each once, resumable after a `seq`.
 * Ends when the task is finished and its frames read (or at the current end without `follow`).
 * `engine` is the `Engine` (only its store is read). Frames are kept until the task has ended
 * (see `streamFrames` of `new Engine()`); after that, a stream's text is the step's output
 * (`engine.get(id).steps`).
 * @example
 * for await (const f of streamEvents(engine, id)) process.stdout.write(f.type === 'stream:reset' ? '\n[retry]\n' : f.delta);
 */
export async function* streamEvents(engine: { ready(): Promise<Pick<Store, 'getTask' | 'getChunks'>> }, taskId: string, options: StreamEventsOptions = {}): AsyncGenerator<StreamEvent> {
  const store = await engine.ready();
  let after = options.after ?? 0;
  const follow = options.follow ?? true;
  const pollMs = options.pollMs ?? 100;
  for (;;) {
    if (options.signal?.aborted) return;
    // Read the status first: if the task is finished then, no chunk can follow those read next.
    const task = follow ? await store.getTask(taskId) : null;
    const rows = await store.getChunks(taskId, after, 500);
    for (const r of rows) {
      after = r.id;
      if (options.step !== undefined && r.step !== options.step) continue;
      yield toStreamEvent(r);
      if (options.signal?.aborted) return;
    }
    if (rows.length === 500) continue;
    if (!follow || !task || isFinished(task.status)) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(done, pollMs);
      function done(): void {
        clearTimeout(t);
        options.signal?.removeEventListener('abort', done);
        resolve();
      }
      options.signal?.addEventListener('abort', done, { once: true });
    });
  }
}
