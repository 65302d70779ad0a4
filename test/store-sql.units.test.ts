// The dialect-free statement pieces of the stores (src/store-sql/): one builder, each dialect's
// placeholders, values bound in placeholder order.
import { describe, expect, it } from 'vitest';
import { approvalTerms, selectionCondition, selectsNothing, statusLiterals, taskListTerms, whereOf } from '../src/store-sql/filters.ts';
import { approvalUpdateSql } from '../src/store-sql/set-list.ts';
import { toScheduleRow } from '../src/store-sql/decoders.ts';
import { SqliteParams } from '../src/sqlite/sql.ts';
import { Params } from '../src/postgres/sql-text.ts';
import type { TaskStatus } from '../src/lifecycle.ts';

describe('store-sql', () => {
  it('builds one approval query for both dialects, with the values in placeholder order', () => {
    const q = { taskId: 't1', statuses: ['pending' as const], approver: 'alice', openOnlyFor: ['waiting' as TaskStatus], limit: 5 };
    const lite = new SqliteParams();
    expect(whereOf(approvalTerms(q, lite, 'tasks'))).toBe(
      "WHERE task_id = ? AND status IN (SELECT value FROM json_each(?)) AND EXISTS (SELECT 1 FROM json_each(approvers) WHERE value = ?) AND (status NOT IN ('pending', 'escalated') OR EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_id AND t.status IN (SELECT value FROM json_each(?))))",
    );
    expect(lite.values).toEqual(['t1', '["pending"]', 'alice', '["waiting"]']);
    const pg = new Params();
    expect(whereOf(approvalTerms(q, pg, 'tasks'))).toBe(
      "WHERE task_id = $1::text AND status = ANY($2::text[]) AND jsonb_exists(approvers::jsonb, $3::text) AND (status NOT IN ('pending', 'escalated') OR EXISTS (SELECT 1 FROM tasks t WHERE t.id = task_id AND t.status = ANY($4::text[])))",
    );
    expect(pg.values).toEqual(['t1', '{"pending"}', 'alice', '{"waiting"}']);
  });

  it('a task listing and a deletion selection take statuses as checked literals; an empty list selects nothing', () => {
    const p = new Params();
    expect(taskListTerms({ statuses: ['succeeded', 'failed'], workflow: 'w', before: 'id9', limit: 10 }, p)).toEqual([
      "status IN ('succeeded', 'failed')",
      'workflow = $1::text',
      'id < $2::text',
    ]);
    expect(selectionCondition({ statuses: ['succeeded'], finishedBefore: 7, dueBy: 9 }, new SqliteParams())).toBe("status IN ('succeeded') AND finished_at < ? AND run_at <= ?");
    expect(() => statusLiterals(["x'; DROP TABLE t; --" as TaskStatus])).toThrow(/Unknown task status/);
    expect(selectsNothing({ statuses: ['succeeded'], ids: [] })).toBe(true);
    expect(selectsNothing({ statuses: ['succeeded'] })).toBe(false);
  });

  it('an approval SET list binds each column with its type; absent keys are left alone', () => {
    const p = new Params();
    expect(approvalUpdateSql('a', 'apv_1', { status: 'approved', level: 2, decidedAt: 5 }, p)).toBe(
      'UPDATE a SET version = version + 1, status = $1::text, level = $2::integer, decided_at = $3::bigint WHERE id = $4::text RETURNING *',
    );
    expect(p.values).toEqual(['approved', 2, 5, 'apv_1']);
  });

  it("decodes a schedule row from either driver's types", () => {
    const raw = {
      id: 's',
      workflow: 'w',
      cron: '* * * * *',
      timezone: null,
      input: null,
      overlap: 'skip',
      catchup_ms: '0',
      next_at: '10',
      last_at: null,
      last_task_id: null,
      buffered_at: null,
      skipped: 0,
      source: 'api',
      created_at: 1,
      updated_at: 2,
    };
    expect(toScheduleRow({ ...raw, paused: 1 })).toMatchObject({ paused: true, nextAt: 10, catchupMs: 0, timezone: null });
    expect(toScheduleRow({ ...raw, paused: false })).toMatchObject({ paused: false });
    expect(toScheduleRow({ ...raw, paused: true })).toMatchObject({ paused: true });
  });
});
