// The journal row's value lists (one per row, and one array per column for batched statements)
// follow STEP_COLUMNS, however they are built.
import { describe, expect, it } from 'vitest';
import { STEP_COLUMNS, stepColumnArrays, stepValues, stepValuesOfTask } from '../src/rows.ts';
import type { StepRow } from '../src/store.ts';

const row = (i: number): StepRow => ({
  taskId: `t${i}`,
  seq: i,
  name: `n${i}`,
  kind: 'sleep',
  status: 'waiting',
  output: `o${i}`,
  error: `e${i}`,
  attempts: i + 1,
  startedAt: 10 + i,
  finishedAt: 20 + i,
  wakeAt: 30 + i,
  epoch: 40 + i,
  done: 50 + i,
  calledAfter: 60 + i,
  businessKey: `k${i}`,
});

describe('journal row values', () => {
  it('lists every column once, in STEP_COLUMNS order', () => {
    const r = row(1);
    expect(stepValues(r)).toHaveLength(STEP_COLUMNS.length);
    expect(new Set(stepValues(r)).size).toBe(STEP_COLUMNS.length);
    expect(stepValuesOfTask(r)).toEqual(stepValues(r).slice(1));
  });

  it('transposes rows into one array per column', () => {
    const rows = [row(1), row(2), row(3)];
    const columns = stepColumnArrays(rows);
    expect(columns).toHaveLength(STEP_COLUMNS.length);
    columns.forEach((values, c) => expect(values).toEqual(rows.map((r) => stepValues(r)[c])));
  });
});
