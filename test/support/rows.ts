// Rows as the store tests write them by hand: a completed step at `seq`, its output
// `{"seq":…}`, under `epoch`; a pending task due at T0.
import type { NewTask, StepRow } from '../../src/store.ts';
import { planCreation } from '../../src/transitions.ts';

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

/**
 * A pending task of workflow `wf` due and created at T0, started by the anonymous user: with
 * `parentId`, a child of that task (one level down).
 */
export function newTask(id: string, parentId?: string): NewTask {
  return {
    id,
    workflow: 'wf',
    workflowVersion: '1',
    input: null,
    idempotencyKey: null,
    runAt: T0,
    createdAt: T0,
    ...(parentId ? { parentId, rootId: parentId, depth: 1 } : {}),
    ...planCreation({ kind: 'user', id: 'anonymous' }),
  };
}
