/**
 * @module replay/journal-copy
 * A task copied into a replay's scratch database: its row, its journal (fenced by a claim of its
 * own, then released so that the replay's worker claims it) and its approval records.
 */
import { sourcesOf, transition } from '../lifecycle.ts';
import type { ApprovalRow, StepRow, Store, TaskRow, WriteOp } from '../store.ts';
import { planCreation } from '../transitions.ts';

const IMPORTER = 'replay-import';

/** Copies the task into the scratch database: the row, its journal (fenced by a claim of its own) and its approvals. */
export async function importTask(store: Store, row: TaskRow, steps: readonly StepRow[], approvals: readonly ApprovalRow[], now: number): Promise<void> {
  const created = planCreation({ kind: 'system', id: IMPORTER });
  await store.insertTask({
    id: row.id,
    workflow: row.workflow,
    workflowVersion: row.workflowVersion,
    input: row.input,
    idempotencyKey: null,
    runAt: now,
    createdAt: row.createdAt,
    deadlineAt: row.deadlineAt,
    status: created.status,
    usage: row.usage,
    log: created.log,
  });
  const reclaimFrom = sourcesOf('reclaim');
  const [claimed] = await store.claim({
    workerId: IMPORTER,
    now,
    leaseMs: 60_000,
    limit: 1,
    workflows: [row.workflow],
    claim: { from: sourcesOf('claim'), to: transition({ status: 'pending' }, 'claim').to },
    reclaim: { from: reclaimFrom, to: Object.fromEntries(reclaimFrom.map((s) => [s, transition({ status: s }, 'reclaim').to])) },
  });
  if (!claimed) throw new Error(`replay: the copy of task ${row.id} could not be claimed in the scratch database`);
  const epoch = claimed.task.epoch;
  if (steps.length) {
    const ops: WriteOp[] = steps.map((s) => ({ kind: 'step', taskId: row.id, epoch, step: { ...s, epoch } }));
    const results = await store.writeBatch(ops);
    if (results.some((r) => r !== true)) throw new Error(`replay: the journal of task ${row.id} could not be copied into the scratch database`);
  }
  for (const approval of approvals) await store.insertApproval({ approval, epoch, at: now, log: [] });
  await store.endLeasesOf(IMPORTER, now);
}
