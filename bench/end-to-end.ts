// End to end, as a user measures it: a warm engine (and, in-process, its worker) in one process;
// the clock runs from the first start() call to the last result() resolved. Optionally the same
// for another build of Stepwise (STEPWISE_BENCH_BASE=<checkout with dist/>) in the same run.
import { join } from 'node:path';
import { spawnWorker, stopWorkers, median } from './lib.ts';

export interface EndToEnd {
  build: string;
  store: string;
  /** 'start': `tasks` concurrent start() calls; 'startMany': one startMany call. */
  submit: 'start' | 'startMany';
  /** 0: the worker runs in the submitting process; n: n worker processes, none in-process. */
  workerProcesses: number;
  tasks: number;
  /** Tasks each worker may run at once. */
  concurrency: number;
  seconds: number;
  stepsPerSec: number;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Api = any;

/** The public API of a build (`dist/index.js` of a checkout). */
export async function api(root: string): Promise<Api> {
  return import(join(root, 'dist/index.js')) as Promise<Api>;
}

/**
 * Tasks each worker may run at once: more than a batch, so that a worker takes the whole burst
 * (DBOS, in the same comparison, runs its 500 workflows at once). Claims still take at most
 * `claimBatch` (256 by default) at a time, back to back.
 */
export const E2E_CONCURRENCY = 512;

/** Seconds from the first start of `tasks` three-step tasks (`submit`) to the last result. */
async function batchSeconds(engine: Api, threeSteps: Api, tasks: number, submit: 'start' | 'startMany'): Promise<number> {
  const t0 = performance.now();
  const handles =
    submit === 'startMany'
      ? await engine.startMany(Array.from({ length: tasks }, () => ({ workflow: threeSteps })))
      : await Promise.all(Array.from({ length: tasks }, () => engine.start(threeSteps)));
  await Promise.all(handles.map((h: Api) => engine.result(h.id, { timeout: '600s' })));
  return (performance.now() - t0) / 1000;
}

/**
 * `rounds` batches of `tasks` tasks × 3 no-op steps after two warm-up batches; the median batch.
 * With `workerProcesses` > 0, the workers are CLI processes of this checkout (`bench/workflows.ts`
 * of the build under test is loaded by them) and the submitting engine runs no worker.
 */
export async function endToEnd(
  root: string,
  build: string,
  url: string,
  store: string,
  submit: 'start' | 'startMany',
  workerProcesses: number,
  tasks = 500,
  rounds = 3,
  concurrency = E2E_CONCURRENCY,
): Promise<EndToEnd> {
  const { Engine } = await api(root);
  // The definition the build's worker processes load too (same name, same version).
  const { threeSteps } = (await import(join(root, 'bench/workflows.ts'))) as Api;
  const engine = new Engine({ store: url, workflows: [threeSteps] });
  await engine.ready();
  const children = Array.from({ length: workerProcesses }, () => spawnWorker(url, ['--concurrency', String(concurrency)], {}, root));
  const worker = workerProcesses ? null : engine.worker({ concurrency });
  await worker?.start();
  try {
    const batch = (): Promise<number> => batchSeconds(engine, threeSteps, tasks, submit);
    await batch();
    await batch();
    const runs: number[] = [];
    for (let r = 0; r < rounds; r++) runs.push(await batch());
    const seconds = median(runs);
    return { build, store, submit, workerProcesses, tasks, concurrency, seconds, stepsPerSec: (tasks * 3) / seconds };
  } finally {
    await worker?.stop();
    await stopWorkers(children);
    await engine.close();
  }
}

/** One concurrency's end to end, measured round by round beside a peer's batches. */
export interface EndToEndBeside {
  concurrency: number;
  tasks: number;
  /** Median of Stepwise's batches, steps per second. */
  stepsPerSec: number;
  /** Median of the peer's batches of the same rounds. */
  peerStepsPerSec: number;
  /** Each round's Stepwise batch over the peer's batch of the same round. */
  roundRatios: number[];
  /** The median of `roundRatios`: the figure. */
  ratio: number;
}

/**
 * End to end at `concurrency`, beside a peer that runs the same batch (500 three-step workflows,
 * the user's call to the last answer): Stepwise's engine and in-process worker are warmed up with
 * two batches, then each round runs one peer batch and one Stepwise batch back to back (which
 * goes first alternates), so that both figures of a round see the same machine. The peer keeps
 * running between rounds (its own warm-up is the caller's).
 */
export async function endToEndBeside(root: string, url: string, concurrency: number, peerBatch: () => Promise<number>, tasks = 500, rounds = 5): Promise<EndToEndBeside> {
  const { Engine } = await api(root);
  const { threeSteps } = (await import(join(root, 'bench/workflows.ts'))) as Api;
  const engine = new Engine({ store: url, workflows: [threeSteps] });
  const worker = engine.worker({ concurrency });
  const batch = (): Promise<number> => batchSeconds(engine, threeSteps, tasks, 'start');
  try {
    await engine.ready();
    await worker.start();
    await batch();
    await batch();
    const ours: number[] = [];
    const theirs: number[] = [];
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) theirs.push(await peerBatch());
      ours.push(await batch());
      if (r % 2 === 1) theirs.push(await peerBatch());
    }
    const steps = tasks * 3;
    const roundRatios = ours.map((s, i) => (theirs[i] as number) / s);
    return { concurrency, tasks, stepsPerSec: steps / median(ours), peerStepsPerSec: steps / median(theirs), roundRatios, ratio: median(roundRatios) };
  } finally {
    await worker.stop();
    await engine.close();
  }
}
