// The one table of task columns against both real schemas: row mapping, patches and the batched
// PostgreSQL statement are generated from it, so it must name every column each schema has.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { PATCH_COLUMNS, TASK_COLUMNS, patchAssignments, toTaskRow } from '../src/task-columns.ts';
import { SqliteStore } from '../src/sqlite/store.ts';
import { hasPostgres, sql } from './support/postgres.ts';
import { schemasOfThisFile, tempDir, tempDbUrl } from './support/engine.ts';
import { openStore } from '../src/index.ts';
import { planCreation } from '../src/transitions.ts';

/** Columns a schema has that are the store's own business, not fields of a task row. */
const STORE_ONLY = new Set(['no', 'event_seq']);
const freshSchema = schemasOfThisFile('sw_columns');
const pgUp = await hasPostgres();

describe('the task-column table', () => {
  it('decodes a row into every field as its column says (the generated decoder)', () => {
    const raw: Record<string, unknown> = {};
    TASK_COLUMNS.forEach((c, i) => (raw[c.column] = c.pg === 'text' ? (c.field === 'waitEvents' ? '|a|b|' : `v${i}`) : c.pg === 'boolean' ? 1 : String(i)));
    const expected: Record<string, unknown> = {};
    for (const c of TASK_COLUMNS) expected[c.field] = c.decode(raw[c.column]);
    const row = toTaskRow(raw);
    expect(row).toEqual(expected);
    expect(Object.keys(row)).toEqual(TASK_COLUMNS.map((c) => c.field));
    expect(row.waitEvents).toEqual(['a', 'b']);
    expect(row.pauseRequested).toBe(true);
    expect(typeof row.epoch).toBe('number');
  });

  it('names every column of the SQLite tasks table, and nothing else', async () => {
    const store = new SqliteStore(join(tempDir(), 'cols.db'));
    try {
      await store.migrate();
      const columns = (store.db.prepare('PRAGMA table_info(stepwise_tasks)').all() as Array<{ name: string }>).map((c) => c.name);
      expect(TASK_COLUMNS.map((c) => c.column).sort()).toEqual(columns.filter((c) => !STORE_ONLY.has(c)).sort());
    } finally {
      await store.close();
    }
  });

  it.skipIf(!pgUp)('names every column of the PostgreSQL tasks table with its type', async () => {
    const schema = freshSchema();
    const store = await openStore(`${(await import('./support/postgres.ts')).PG_URL}?schema=${schema}`);
    try {
      await store.migrate();
      const rows = await sql<{ column_name: string; data_type: string }>(`SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'tasks'`, [
        schema,
      ]);
      const types: Record<string, string> = { text: 'text', bigint: 'bigint', integer: 'integer', boolean: 'boolean' };
      const actual = rows
        .filter((r) => !STORE_ONLY.has(r.column_name))
        .map((r) => `${r.column_name}:${r.data_type}`)
        .sort();
      expect(TASK_COLUMNS.map((c) => `${c.column}:${types[c.pg]}`).sort()).toEqual(actual);
    } finally {
      await store.close();
    }
  });

  it('reads every field of a stored task, and writes every patch field to its column', async () => {
    const store = await openStore(tempDbUrl());
    try {
      await store.migrate();
      const { task } = await store.insertTask({
        id: 't-cols',
        workflow: 'w',
        workflowVersion: '1',
        input: '{"a":1}',
        idempotencyKey: 'k',
        runAt: 5,
        createdAt: 5,
        ...planCreation({ kind: 'user', id: 'u' }),
      });
      for (const c of TASK_COLUMNS) expect(task, c.field).toHaveProperty(c.field);
      expect(task).toMatchObject({ id: 't-cols', input: '{"a":1}', idempotencyKey: 'k', runAt: 5, epoch: 0, pauseRequested: false, waitEvents: null });
      const full = {
        output: '1',
        error: null,
        runAt: 7,
        pauseRequested: true,
        wait: '{}',
        waitEvents: ['a', 'b'],
        cancelReason: 'r',
        finishedAt: 9,
        deadlineAt: 11,
        hasCleanup: true,
        redo: '{"a":1}',
        undoFrom: 3,
      };
      const assigned = new Map(patchAssignments(full, (b) => b, 0));
      for (const c of PATCH_COLUMNS) expect(assigned.has(c.column), c.column).toBe(true);
      expect(assigned.get('wait_events')).toBe('|a|b|');
      // An expired lease: no owner, and an expiry of the store's now (a value, or SQL text).
      expect(patchAssignments({ expireLease: true }, (b) => b, { raw: 'now_ms' })).toEqual([
        ['lease_owner', null],
        ['lease_expires_at', { raw: 'now_ms' }],
      ]);
      expect(toTaskRow({ id: 'x', epoch: '3', pause_requested: 1, wait_events: '|a|' })).toMatchObject({ epoch: 3, pauseRequested: true, waitEvents: ['a'] });
    } finally {
      await store.close();
    }
  });
});
