/**
 * @module primitives/sleep
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.sleep(name, duration)`: its wake-up time is recorded once, so a resumed sleep ends when it
 * was meant to. A short sleep runs in-process; a long one is a wait the task may park on.
 */
import { toMs, type Duration } from '../duration.ts';
import { call, type Primitive } from '../run/call.ts';
import type { Run } from '../run/run.ts';
import { journalRow, type Position } from '../run/identity.ts';
import { throwIfHalted } from '../run/state.ts';
import { holdFor, pauseUntil, type Wait } from '../run/waits.ts';

const SLEEP: Primitive<Duration, undefined, { pos: Position; ms: number }, void> = {
  kind: 'sleep',
  replayed: () => undefined,
  prepare: (_run, pos, duration) => ({ pos, ms: toMs(duration, `duration of sleep "${pos.stepId}"`) }),
  async start(run, { pos, ms }, activity) {
    const { seq, stepId, recorded } = pos;
    const { clock, parkAfterMs } = run.deps;
    const now = clock.now();
    const row = recorded ?? journalRow(run, seq, stepId, 'sleep', { status: 'waiting', startedAt: now, wakeAt: now + ms });
    const wakeAt = row.wakeAt as number;
    const wait: Wait = { row, wakeAt, events: [], describe: { kind: 'sleep', step: stepId, until: wakeAt } };
    // The wake-up time is recorded once, so a resumed sleep ends when it was meant to.
    if (!recorded && wakeAt - now <= parkAfterMs) {
      await run.writer.flush();
      await run.writer.checkpoint(row);
    }
    await pauseUntil(run, wakeAt, wait, activity);
    throwIfHalted(run.state);
    if (run.blocked()) return holdFor(run, wait, activity);
    return run.writer.complete({ ...row, status: 'completed', finishedAt: clock.now() }, () => undefined);
  },
};

export function sleep(run: Run, name: string, duration: Duration): Promise<void> {
  return call(run, SLEEP, name, duration, undefined);
}
