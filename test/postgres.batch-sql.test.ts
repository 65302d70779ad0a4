// The batched checkpoint statement's rows: the last write of a (task, position) wins, a row of
// another task than its writer's is refused, and each row's place among its task's rows numbers
// its log entry (no database needed: the statement's parameters are checked).
import { describe, expect, it } from 'vitest';
import { stepBatchSql } from '../src/postgres/batch-sql.ts';
import { tablesOf } from '../src/postgres/sql-text.ts';
import type { StepRow, StepWrite } from '../src/store.ts';

const row = (taskId: string, seq: number, epoch: number, output = '1'): StepRow => ({
  taskId,
  seq,
  name: `s${seq}`,
  kind: 'step',
  status: 'completed',
  output,
  error: null,
  attempts: 1,
  startedAt: 1,
  finishedAt: 2,
  wakeAt: null,
  epoch,
  done: seq + 1,
  calledAfter: null,
  businessKey: null,
});
const op = (taskId: string, seq: number, epoch = 1, output = '1', writer = taskId): StepWrite => ({ kind: 'step', taskId: writer, epoch, step: row(taskId, seq, epoch, output) });

describe('stepBatchSql', () => {
  it('maps each op to its row: later writes of a position win, foreign rows are refused, places count per task', () => {
    const ops = [op('a', 0), op('b', 0), op('a', 1), op('a', 0, 1, 'again'), op('c', 0, 1, '1', 'b'), op('d', 4, 2)];
    const { values, rowOf } = stepBatchSql(tablesOf('s'), ops);
    // Rows: a/0 (written with 'again'), b/0, a/1, d/4; the op writing c's row as b is refused.
    expect(rowOf).toEqual([1, 2, 3, 1, 0, 4]);
    // The columns come first (task id, seq, name, kind, status, output, …), then epoch, entry time, type, data, place.
    expect(values[0]).toBe('{"a","b","a","d"}');
    expect(values[1]).toBe('{0,0,1,4}');
    expect(values[5]).toBe('{"again","1","1","1"}');
    expect(values.at(-1)).toBe('{1,1,2,1}');
  });
});
