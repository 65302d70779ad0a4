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
    // The rows' count comes first, then the columns (task id, seq, name, kind, status, output, …),
    // then epoch, entry time, type, data, place; a column of one value throughout is sent once.
    expect(values[0]).toBe(4);
    expect(values[1]).toBe('{"a","b","a","d"}');
    expect(values[2]).toBe('{0,0,1,4}');
    expect(values[4]).toBe('{"step"}');
    expect(values[5]).toBe('{"completed"}');
    expect(values[6]).toBe('{"again","1","1","1"}');
    expect(values.at(-1)).toBe('{1,1,2,1}');
  });

  it('sends a column whose rows all hold one value once, in the same statement text as a column whose values differ', () => {
    const same = stepBatchSql(tablesOf('s'), [op('a', 0), op('b', 0), op('c', 0)]);
    const differ = stepBatchSql(tablesOf('s'), [op('a', 0, 1, '1'), op('b', 0, 1, '2'), op('c', 0, 1, '3')]);
    expect(same.text).toBe(differ.text);
    expect(same.values[6]).toBe('{"1"}');
    expect(differ.values[6]).toBe('{"1","2","3"}');
    // Nulls are one value too; a batch of one row sends its arrays as they are (no count).
    expect(same.values[7]).toBe('{null}');
    const one = stepBatchSql(tablesOf('s'), [op('a', 0)]);
    expect(one.values[0]).toBe('{"a"}');
    expect(one.text).not.toContain('array_fill');
  });
});
