// Journal rows as the store tests write them by hand: a completed step at `seq`, its output
// `{"seq":…}`, under `epoch`.
import type { StepRow } from '../../src/store.ts';

const T0 = 1_700_000_000_000;

export function stepRow(taskId: string, seq: number, epoch: number, over: Partial<StepRow> = {}): StepRow {
  return {
    taskId,
    seq,
    name: `s${seq}`,
    kind: 'step',
    status: 'completed',
    output: JSON.stringify({ seq }),
    error: null,
    attempts: 1,
    startedAt: T0,
    finishedAt: T0 + 1,
    wakeAt: null,
    epoch,
    done: seq + 1,
    calledAfter: seq,
    businessKey: null,
    ...over,
  };
}
