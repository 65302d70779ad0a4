/**
 * @module replay/replay-end
 * How a replay ended, read from the write its worker stopped at: the run's end (a complete or fail
 * transition) and how it differs from the recorded task's.
 */
import { decodeError, decodeJson } from '../serialize.ts';
import type { TaskRow, TransitionWrite, WriteOp } from '../store.ts';
import { firstDifference, sameJson, show } from './compare.ts';
import type { ProcessStore } from './process-store.ts';

/** The run's end, if the write the replay stopped at is one: a transition that carries no new row. */
export function endOf(v: ProcessStore): TransitionWrite | null {
  const args = v.deathArgs;
  if (!args) return null;
  const ops: WriteOp[] = Array.isArray(args[0]) ? (args[0] as WriteOp[]) : [args[0] as WriteOp];
  const op = ops.find((o) => o.kind === 'transition');
  if (!op || op.kind !== 'transition' || op.steps?.length) return null;
  return op.event === 'complete' || op.event === 'fail' ? op : null;
}

export function errorOf(t: TransitionWrite): { name: string; code: string | null; message: string } | null {
  if (!t.set.error) return null;
  const e = decodeError(t.set.error);
  return { name: e.name, code: e.code ?? null, message: e.message };
}

/** How the replay's end differs from the task's, or null. */
export function otherEnd(row: TaskRow, end: TransitionWrite | null): string | null {
  if (!end) return 'the replay stopped before the code ended.';
  if (row.status === 'succeeded') {
    if (end.event !== 'complete') return `the task succeeded, but the code now fails: ${show(errorOf(end))}.`;
    const was = decodeJson(row.output);
    const now = end.set.output === undefined ? undefined : decodeJson(end.set.output);
    if (sameJson(was, now)) return null;
    const d = firstDifference(was, now);
    return `the code returns another output${d ? ` at ${d.path || 'the top'}: ${show(d.a)} recorded, ${show(d.b)} now` : ''}.`;
  }
  if (end.event !== 'fail') return `the task failed, but the code now succeeds with ${show(end.set.output === undefined ? undefined : decodeJson(end.set.output))}.`;
  const was = row.error ? decodeError(row.error) : null;
  const now = errorOf(end);
  if (was && now && (was.code ?? null) === now.code && was.message === now.message) return null;
  return `the code fails otherwise: ${show(now)} now, ${show(was && { name: was.name, code: was.code ?? null, message: was.message })} recorded.`;
}
