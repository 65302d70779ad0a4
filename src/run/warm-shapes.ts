/**
 * @module run/warm-shapes
 * Internal: not part of the public API (the package exports only its index modules).
 * The newest object of each kind the step path makes per run or per step, kept alive until the next
 * one replaces it, so that V8's optimised code for that path survives a worker's idle spells.
 *
 * V8 holds the hidden classes (maps) embedded in optimised code weakly: a full collection that finds
 * no live object of such a class frees it and throws the code away ("weak objects"). A worker that
 * goes idle gets such a collection from V8's memory reducer (after about 8 s of quiet), when every
 * object of the last burst is garbage; the next burst then runs unoptimised and compiles the step
 * path again on V8's background threads, CPU a small machine takes from the worker and the
 * database. One object of each kind is enough to keep its class, and through the run it
 * references (the `ctx` and the step's objects reach the run's own), the classes of the rest of
 * the run.
 *
 * The cost is memory: an idle worker keeps the objects of the last run it worked on (its step's
 * output among them) until it works on another one. `docs/architecture.md` ("Hot paths and V8's
 * optimised code") says more, `docs/benchmarks.md` (2026-12-07) has the measurements.
 */
export const newest: {
  /** The `ctx` of the newest run (`primitives/context.ts`): its bound primitives are closures whose code V8 keeps only while one is alive. */
  runContext: object | null;
  /** The newest step attempt (`run/attempt.ts`). */
  attempt: object | null;
  /** What the newest attempt's step function received (`run/attempt.ts`). */
  stepContext: object | null;
} = { runContext: null, attempt: null, stepContext: null };
