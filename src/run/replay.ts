/**
 * @module run/replay
 * Internal: not part of the public API (the package exports only its index modules).
 * Order. Every result handed to the workflow code (a step's output or failure, an elapsed sleep,
 * an event) is recorded with its place in the order the code received them (`done`). Replay hands
 * recorded results back in that same order, one at a time, letting the code's continuations run
 * in between, so the code makes the same calls in the same order as the first time — also when
 * `Promise.all` branches await different things. Results produced in this run are handed over
 * only after the replay is complete, in the order they were recorded.
 *
 * Results are handed over one per turn, a turn being the moment the code's continuations have
 * all run (see {@link nextTurn}), in the first run as in replay, so both interleave branches
 * identically. The one exception is a result of the only call in flight, after the replay:
 * nothing can be ordered against it (the code makes the same lone call in a replay), so the next
 * result may follow without waiting for a turn, for a while (see `turns.ts`).
 *
 * The cleanup scope's recorded results are not part of this order: they are handed back when
 * asked for (see `cleanup-scope.ts`), and its new results follow their own order, so that the
 * cleanup never waits for the code's replay (the code may have stopped before the end of it).
 */
import type { StepRow } from '../store.ts';
import { scheduleIdleCheck } from './activity.ts';
import type { RunCore } from './core.ts';
import { isCleanupSeq } from './cleanup-scope.ts';
import { diverged } from './identity.ts';
import { mayStayInTurn, nextTurn } from './turns.ts';
import { isRef } from '../payloads/token.ts';
import { withResolvers } from '../resolvers.ts';
import { opened, resultOf, settleWith, settledWith, type Chain, type HandOver, type Reservation } from './hand-over.ts';
import { ERROR_CODES, PayloadUnreadableError, StoreUnavailableError, coerceError, isStepwiseError } from '../errors.ts';

/** Recorded outputs left as references by the claim (see `resolvePayloads`) loaded at once, ahead of the replay. */
const LOAD_AHEAD = 4;

/**
 * A replay that waits this long (real time) for the code to make the call the journal says comes
 * next has diverged (a worker may set another length for tests: `RunDeps.replayStallMs`).
 */
export const REPLAY_STALL_MS = 30_000;

/** What ends the replay of a run that had nothing to replay: it was over from the start. */
function nothing(): void {}

/** The replay's end in a run with nothing to replay: settled from the start. */
const SETTLED: Promise<void> = Promise.resolve();

// --- one run's replay ----------------------------------------------------------------------------

export class Replay {
  readonly #run: RunCore;
  /** The recorded results, in `done` order. */
  readonly #rows: StepRow[];
  #index = 0;
  /** Hands a recorded result to the code; with `failure`, rejects the call with it instead (made at the first). */
  #calls: Map<number, (failure?: unknown) => void> | null = null;
  /** Recorded outputs being loaded (see {@link #load}), and the references they replaced (made at the first). */
  #loading: Promise<void> | null = null;
  #refs: Map<StepRow, string> | null = null;
  #loadFailure: unknown = undefined;
  /** A replay turn is pending. */
  scheduled = false;
  #stall: NodeJS.Timeout | null = null;
  #finished!: () => void;
  /** The last recorded `done` (results handed to the code so far). */
  #done: number;
  /** The `done` of the last result handed to the code in this run (0: none yet). */
  handed = 0;
  /** Results of this run are handed over in `done` order, after the replay. */
  readonly #chain: Chain = { gate: null, tail: null };
  /** The cleanup scope's new results, in `done` order among themselves. */
  readonly #cleanupChain: Chain = { gate: null, tail: null };
  /** Resolves once the code has been handed back every recorded result, or the run gave up on the rest. */
  readonly #over: Promise<void>;
  #overNow!: () => void;
  /** The replay waits for a call the code has not made (the next recorded result is not asked for). */
  #stuck = false;
  #unstuck: Array<() => void> = [];
  /** The cleanup scope has begun: the code gets nothing more, and the replay no longer watches for a stall. */
  #closed = false;

  constructor(run: RunCore, steps: readonly StepRow[]) {
    this.#run = run;
    const done = steps.filter((s) => s.done !== null);
    this.#rows = done.filter((s) => !isCleanupSeq(s.seq)).sort((a, b) => (a.done as number) - (b.done as number));
    this.#done = done.reduce((max, s) => Math.max(max, s.done as number), 0);
    if (!this.#rows.length) {
      // Nothing to replay (a task's first run): over already, and no promise made to say so.
      this.#over = SETTLED;
      this.#finished = this.#overNow = nothing;
      return;
    }
    ({ promise: this.#chain.gate, resolve: this.#finished } = withResolvers<void>());
    ({ promise: this.#over, resolve: this.#overNow } = withResolvers<void>());
  }

  #finish(): void {
    this.#finished();
    this.#chain.gate = null;
    this.#overNow();
  }

  /** Recorded results of the code remain to be handed back. */
  get pending(): boolean {
    return this.#index < this.#rows.length;
  }

  /** The run will not wait for the rest of the replay (it lost its lease, or the replay diverged). */
  abandon(): void {
    this.#overNow();
  }

  /**
   * The cleanup scope begins: the code's calls no longer start (see `cleanup-scope.ts`), so what it
   * has not been handed back yet it will not ask for in this run. The replay hands back nothing more
   * and stops watching for a stall: a cleanup longer than the stall timeout is no divergence.
   */
  closeForCleanup(): void {
    this.#closed = true;
    if (this.#stall) clearTimeout(this.#stall);
    this.#stall = null;
    this.#overNow();
  }

  /**
   * Resolves once the replay is over or waits for a call the code has not made: the code has then
   * been handed back every recorded result it asked for (see the cleanup in `TaskRun.execute`).
   */
  whenStuck(): Promise<void> {
    if (this.#stuck || !this.pending) return Promise.resolve();
    return Promise.race([this.#over, new Promise<void>((resolve) => this.#unstuck.push(resolve))]);
  }

  /** The recorded result the code has not been handed back yet, if any (none once the cleanup began). */
  expected(): StepRow | undefined {
    return this.#closed ? undefined : this.#rows[this.#index];
  }

  /** At the start of the run: arms the stall watchdog in case the first call never comes. */
  start(): void {
    if (this.#rows.length) this.#schedule();
  }

  /** At the end of the run. */
  stop(): void {
    if (this.#stall) clearTimeout(this.#stall);
  }

  /** The `done` of the next result recorded in this run. */
  nextDone(): number {
    return ++this.#done;
  }

  /** A call of the cleanup scope whose result is recorded: handed back at the next turn, whatever its `done`. */
  recalled<T>(settle: (rec: StepRow, stepId: string) => T, rec: StepRow, stepId: string): Promise<T> {
    const store = this.#run.deps.store;
    if (isRef(rec.output) && store.resolvePayloads) {
      return store.resolvePayloads([rec.output]).then(([text]) => this.#recall(settle, { ...rec, output: text as string }, stepId));
    }
    return this.#recall(settle, rec, stepId);
  }

  #recall<T>(settle: (rec: StepRow, stepId: string) => T, rec: StepRow, stepId: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      nextTurn(() => {
        this.#run.activity++;
        try {
          resolve(settle(rec, stepId));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  /** A call whose result is recorded: it is handed back when its turn (`done`) comes. */
  replayed<T>(seq: number, settle: (rec: StepRow, stepId: string) => T, rec: StepRow, stepId: string): Promise<T> {
    this.#stuck = false;
    return new Promise<T>((resolve, reject) => {
      (this.#calls ??= new Map()).set(seq, (failure?: unknown) => {
        if (failure !== undefined) return reject(failure);
        try {
          resolve(settle(rec, stepId));
        } catch (e) {
          reject(e);
        }
      });
      this.#schedule();
    });
  }

  /**
   * Loads the recorded outputs the claim left as references, from the next row on (a few rows
   * ahead), so that a long replay holds a few recorded values at a time rather than all of them.
   */
  #load(from: number): void {
    if (this.#loading) return;
    const rows: StepRow[] = [];
    for (let i = from; i < this.#rows.length && rows.length < LOAD_AHEAD; i++) {
      const row = this.#rows[i] as StepRow;
      if (!this.#refs?.has(row) && isRef(row.output)) rows.push(row);
    }
    const resolve = this.#run.deps.store.resolvePayloads;
    if (!resolve) {
      // A reference no layer can load: the call fails with it rather than waiting for ever.
      this.#loadFailure = new PayloadUnreadableError(`Step "${rows[0]?.name ?? '?'}" has a recorded output in the payload store, and this store cannot read it (it is not the engine's).`);
      this.#schedule();
      return;
    }
    this.#loading = resolve
      .call(
        this.#run.deps.store,
        rows.map((r) => r.output as string),
      )
      .then(
        (texts) => {
          rows.forEach((r, i) => {
            (this.#refs ??= new Map()).set(r, r.output as string);
            r.output = texts[i] as string;
          });
        },
        (e: unknown) => {
          // A value that cannot be read fails its call; anything else (the store is away) stops
          // the run, as a failed write does, and hands the code nothing.
          if (isStepwiseError(e, ERROR_CODES.PAYLOAD_UNREADABLE)) this.#loadFailure = e;
          else this.#run.lose('store', () => new StoreUnavailableError(`Could not load the recorded outputs of task ${this.#run.taskId}: ${coerceError(e).message}`, { cause: e }));
        },
      )
      .finally(() => {
        this.#loading = null;
        this.#schedule();
      });
  }

  #schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    // After the code's pending continuations (microtasks) have run.
    nextTurn(() => {
      this.scheduled = false;
      this.#next();
    });
  }

  /** Hands back the next recorded result if the code has asked for it; one per turn. */
  #next(): void {
    const run = this.#run;
    if (run.ended || this.#closed || run.abandoned) return;
    const next = this.#rows[this.#index];
    if (!next) {
      this.#finish();
      scheduleIdleCheck(run);
      return;
    }
    const unloaded = !this.#refs?.has(next) && isRef(next.output);
    if (unloaded && this.#loadFailure === undefined) {
      this.#load(this.#index);
      return;
    }
    const call = this.#calls?.get(next.seq);
    if (!call) {
      this.#stuck = true;
      for (const f of this.#unstuck.splice(0)) f();
      // The code has not made this call yet: wait for it, but not forever.
      if (this.#stall) clearTimeout(this.#stall);
      const index = this.#index;
      this.#stall = setTimeout(() => {
        if (this.#index !== index || run.ended || this.#closed) return;
        this.abandon();
        diverged(run, next, `replay expects ${next.kind} "${next.name}" (position ${next.seq}) to be called next, as it was when the task first ran, but the code has not called it.`);
      }, run.deps.replayStallMs ?? REPLAY_STALL_MS);
      this.#stall.unref?.();
      return;
    }
    if (this.#stall) clearTimeout(this.#stall);
    this.#stall = null;
    this.#calls?.delete(next.seq);
    this.#index++;
    run.activity++;
    this.handed = next.done as number;
    call(unloaded ? this.#loadFailure : undefined);
    // The code has the value now: the row goes back to its reference, and the text can be freed.
    const ref = this.#refs?.get(next);
    if (ref !== undefined) {
      next.output = ref;
      this.#refs?.delete(next);
    }
    this.#schedule();
  }

  /**
   * Hands a result of this run to the code in `done` order, after the replay: `done` was taken
   * when it was recorded, the result (`value()`, or what it throws) is handed over once every
   * earlier result has been released; it is released a turn later, as in replay, or at once when
   * it is the only call in flight (see `#mayHandOverAtOnce`). A result with nothing before it is
   * handed over in its promise's first reaction. A result of the cleanup scope (`cleanup`) waits
   * only for the cleanup's earlier results.
   */
  inOrder<T>(value: () => T, done: number, afterHandOver?: () => void, cleanup = false): Promise<T> {
    const { h, previous } = this.#join(done, afterHandOver, cleanup);
    const work = settledWith(value);
    // The result's callbacks are methods bound to its state, not closures made per result: V8
    // compiles a per-call closure again after each quiet spell of the worker (see resolvers.ts).
    if (previous === null) {
      // Nothing to wait for (the common case: the code awaits one call at a time): the result is
      // handed over as it settles, and no promise is made for the next one unless it comes first.
      const now = this.#readyAndHandedOver.bind(this, h);
      work.then(now, now);
      return work;
    }
    return this.#behind(previous, work, h);
  }

  /**
   * Takes place `done` in the code's order (or the cleanup's) now, for a result whose value comes
   * later: a transaction's (its `done` is taken inside its commit, before the commit's answer).
   */
  reserve<T>(done: number, cleanup: boolean): Reservation<T> {
    const { h, previous } = this.#join(done, undefined, cleanup);
    const slot = withResolvers<T>();
    return {
      promise: this.#behind(previous ?? SETTLED, slot.promise, h),
      settle: (value) => settleWith(slot, value),
      cancel: () => {
        h.void = true;
        slot.reject(new Error('cancelled'));
      },
    };
  }

  /** A new result at the end of its chain, counted live; `previous`: what it waits for (null: nothing). */
  #join(done: number, afterHandOver: (() => void) | undefined, cleanup: boolean): { h: HandOver; previous: Promise<void> | null } {
    const chain = cleanup ? this.#cleanupChain : this.#chain;
    const previous = chain.tail ? opened(chain.tail) : chain.gate;
    const h: HandOver = { done, afterHandOver, cleanup, gated: false, opened: null, open: null, void: false };
    chain.tail = h;
    this.#run.live++;
    return { h, previous };
  }

  /** `work`'s result, handed over once `previous` has settled. */
  #behind<T>(previous: Promise<void>, work: Promise<T>, h: HandOver): Promise<T> {
    const ready = this.#ready.bind(this, h);
    work.then(ready, ready);
    const settled = previous.then(resultOf.bind(null, work) as () => Promise<T>);
    const handedOver = this.#handedOver.bind(this, h);
    settled.then(handedOver, handedOver);
    return settled;
  }

  #readyAndHandedOver(h: HandOver): void {
    this.#ready(h);
    this.#handedOver(h);
  }

  /** A result is ready; if it still waits for the replay, the run may be stalled on it. */
  #ready(h: HandOver): void {
    if (h.cleanup) return;
    const run = this.#run;
    h.gated = true;
    run.gated++;
    scheduleIdleCheck(run);
    if (this.#index < this.#rows.length) this.#schedule();
  }

  /** The code has the result: the next one may follow, now or a turn later. */
  #handedOver(h: HandOver): void {
    if (h.void) return this.#release(h);
    this.#run.activity++;
    this.handed = h.done;
    h.afterHandOver?.();
    if (this.#mayHandOverAtOnce()) this.#release(h);
    else nextTurn(this.#release.bind(this, h));
  }

  #release(h: HandOver): void {
    const run = this.#run;
    if (h.gated) run.gated--;
    run.live--;
    run.changed();
    const chain = h.cleanup ? this.#cleanupChain : this.#chain;
    if (chain.tail === h) chain.tail = null;
    h.open?.();
    scheduleIdleCheck(run);
  }

  /**
   * Whether the next result may follow this one without waiting for a turn: this is the only call
   * in flight (its own activity and hand-over: nothing it could be ordered against, now or in a
   * replay, where the code makes the same lone call) and the replay is over. Bounded in number and
   * time, so that timers and I/O get in between.
   */
  #mayHandOverAtOnce(): boolean {
    if (this.#run.live > 2 || this.#index < this.#rows.length || this.scheduled) return false;
    return mayStayInTurn();
  }
}
