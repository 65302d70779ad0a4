// (drain-long) The drain against the floor over bursts four times as long as the headline's: 2,000
// tasks of 3 no-op steps instead of 500. A 500-task burst lasts 50–150 ms here, so one collector
// pause, a checkpoint of the server or a neighbour's burst of CPU moves its figure by tens of
// percent, and the claims that start a burst weigh as much as the steps. Over 2,000 tasks both
// sides run at their steady pace for most of the span. Same harness as the headline's row 3
// (bench/postgres.ts pgThroughput, bench/floor.ts floorThroughput), rounds interleaved.
import { fmt, median, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { floorThroughput } from './floor.ts';

export const LONG_DRAIN_TASKS = 2000;

export async function report({ quick, pgUp, line, results }: SectionCtx): Promise<void> {
  line(`\n(drain-long) Drain of ${fmt(LONG_DRAIN_TASKS, 0)} × 3 no-op steps against the hand-written SQL worker, 1 and 2 worker processes`);
  if (!pgUp) {
    line('    skipped: PostgreSQL is not reachable');
    return;
  }
  const out: Array<{ workers: number; fraction: number; rounds: Array<{ ours: number; floor: number }> }> = [];
  for (const workers of [1, 2]) {
    const rounds: Array<{ ours: number; floor: number }> = [];
    for (let r = 0; r < (quick ? 1 : 3); r++) {
      const ours = (await postgres.pgThroughput(workers, LONG_DRAIN_TASKS)).stepsPerSec;
      const floor = (await floorThroughput(workers, LONG_DRAIN_TASKS)).stepsPerSec;
      rounds.push({ ours, floor });
    }
    const fraction = median(rounds.map((x) => x.ours / x.floor));
    out.push({ workers, fraction, rounds });
    line(
      `    ${workers} process${workers > 1 ? 'es' : ''}: ${fmt(fraction, 2)} of the floor (rounds ${rounds.map((x) => `${fmt(x.ours, 0)} / ${fmt(x.floor, 0)} steps/s = ${fmt(x.ours / x.floor, 2)}`).join('; ')})`,
    );
  }
  results.longDrain = out;
}
