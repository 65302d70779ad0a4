/**
 * @module primitives/for-each
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.forEach(name, items, fn, { chunkSize, concurrency })`: a long loop that makes durable
 * progress. The items are cut into chunks of `chunkSize`; each chunk is one step
 * (`<name>:<first>-<last>`, checkpointed with the results of its items), run in order, with up to
 * `concurrency` items of the chunk in flight at once. A crash, a stop or a cancel loses at most the
 * chunk in progress: a resume replays the completed chunks from the journal and goes on after the
 * last of them. The journal holds one row per chunk (a 10,000-item loop in chunks of 100 is 100
 * rows), and each item's result is kept in its chunk's output.
 */
import { FOR_EACH_OPTION_NAMES } from '../api/step.ts';
import { checkCallOptions } from './call-options.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { ForEachOptions, StepContext } from '../api/step.ts';
import type { Run } from '../run/run.ts';
import { step } from './step.ts';

const DEFAULT_CHUNK = 100;

/** Runs `fn` over the chunk's items with at most `concurrency` at once; results in item order. */
async function runChunk<T, R>(items: readonly T[], offset: number, concurrency: number, fn: (item: T, index: number, s: StepContext) => R | PromiseLike<R>, s: StepContext): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      if (s.signal.aborted) throw s.signal.reason;
      out[i] = await fn(items[i] as T, offset + i, s);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}

export async function forEach<T, R>(
  run: Run,
  name: string,
  items: readonly T[],
  fn: (item: T, index: number, s: StepContext) => R | PromiseLike<R>,
  options: ForEachOptions = {},
): Promise<R[]> {
  const bad = (m: string): Error => run.fail(new InvalidArgumentError(`ctx.forEach("${name}"): ${m}`));
  if (!Array.isArray(items)) throw bad('items must be an array (the same on every run: compute it in an earlier step).');
  if (typeof fn !== 'function') throw bad('the third argument must be a function of (item, index, step).');
  checkCallOptions(run, options, FOR_EACH_OPTION_NAMES, `ctx.forEach("${name}")`);
  const { chunkSize = DEFAULT_CHUNK, concurrency = 1, ...stepOptions } = options;
  if (!Number.isInteger(chunkSize) || chunkSize < 1) throw bad(`chunkSize must be an integer ≥ 1, got ${String(chunkSize)}.`);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw bad(`concurrency must be an integer ≥ 1, got ${String(concurrency)}.`);
  const results: R[] = [];
  for (let start = 0; start < items.length; start += chunkSize) {
    const chunk = items.slice(start, start + chunkSize);
    const end = start + chunk.length - 1;
    const done = await step(run, `${name}:${start}-${end}`, (s) => runChunk(chunk, start, concurrency, fn, s), stepOptions);
    for (const r of done as R[]) results.push(r);
    run.progress.report(null, { done: end + 1, total: items.length, note: name });
  }
  return results;
}
