// EXPLAIN ANALYZE of a store statement as the store runs it: prepared with a generic plan, its
// parameters as the driver sends them, in a transaction rolled back afterwards.
import type pg from 'pg';
import type { StepRow } from '../../src/store.ts';
import { stepRow } from './rows.ts';

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Rows Removed by Join Filter'?: number;
  'Join Filter'?: string;
  'CTE Name'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}

/** Runs `text` as a prepared statement with a generic plan, under EXPLAIN ANALYZE, and rolls it back. */
export async function explain(c: pg.Client, text: string, values: unknown[]): Promise<PlanNode> {
  const literal = (v: unknown): string => {
    if (v === null || v === undefined) return 'NULL';
    if (Array.isArray(v)) return c.escapeLiteral(`{${v.map((x) => (x === null ? 'NULL' : `"${String(x).replace(/["\\]/g, '\\$&')}"`)).join(',')}}`);
    return c.escapeLiteral(String(v));
  };
  await c.query('BEGIN');
  try {
    await c.query(`PREPARE probe AS ${text}`);
    const r = await c.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) EXECUTE probe(${values.map(literal).join(', ')})`);
    return (r.rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan;
  } finally {
    await c.query('ROLLBACK');
    await c.query('DEALLOCATE ALL'); // a prepared statement outlives the transaction
  }
}

/** The time the plan tests' probe rows carry. */
export const PROBE_NOW = 1_000_000;

/** The id of the plan tests' task number `n`. */
export const probeId = (n: number): string => `task-${String(n).padStart(6, '0')}`;

/** A completed journal row of `taskId` at `seq`, under epoch 1, as the plan tests write it. */
export function probeStep(taskId: string, seq: number): StepRow {
  return stepRow(taskId, seq, 1, { output: '1', startedAt: PROBE_NOW, finishedAt: PROBE_NOW, done: null, calledAfter: null });
}
