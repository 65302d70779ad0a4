/**
 * @module postgres/sql-text
 * @internal
 * Building blocks of the PostgreSQL store's statements: typed positional parameters, status
 * literals, column types, and the quoted table names of one schema.
 */
import { InvalidArgumentError } from '../errors.ts';
import { LEASED_STATUSES, isTaskStatus, type TaskStatus } from '../lifecycle.ts';
import { STEP_COLUMNS } from '../rows.ts';

/**
 * Task statuses as SQL literals. Statuses come from the lifecycle table, never from users, but
 * are checked anyway; literals (rather than parameters) let the planner match the partial indexes.
 */
export function sqlStatuses(statuses: readonly TaskStatus[]): string {
  return statuses
    .map((s) => {
      if (!isTaskStatus(s)) throw new InvalidArgumentError(`Unknown task status "${String(s)}"`);
      return `'${s}'`;
    })
    .join(', ');
}

export const LEASED_SQL = sqlStatuses(LEASED_STATUSES);

/** SQL types of {@link STEP_COLUMNS}, in order. */
export const STEP_TYPES = ['text', 'integer', 'text', 'text', 'text', 'text', 'text', 'integer', 'bigint', 'bigint', 'bigint', 'integer', 'integer'] as const;

/** SQL types of the columns a TaskPatch may write. */
export const PATCH_TYPES: Readonly<Record<string, string>> = {
  output: 'text', error: 'text', run_at: 'bigint', lease_owner: 'text', lease_expires_at: 'bigint',
  pause_requested: 'boolean', wait: 'text', wait_events: 'text', cancel_reason: 'text', finished_at: 'bigint',
};

export const STEP_UPSERT_SET = STEP_COLUMNS.slice(2).map((c) => `${c} = excluded.${c}`).join(', ');

/**
 * The fenced checkpoint of one plain step: parameters are the step's columns ($1…$13, in
 * {@link STEP_COLUMNS} order), then the task id and the writer's epoch. Accepted (one row) only
 * while the task is leased at that epoch; `FOR SHARE` holds off a concurrent claim (whose epoch
 * bump would otherwise commit between the check and the insert) and lets concurrent step writes of
 * the same task proceed together.
 */
export function plainStepSql(t: Tables): string {
  const n = STEP_COLUMNS.length;
  const values = STEP_TYPES.map((type, i) => `$${i + 1}::${type}`).join(', ');
  return `INSERT INTO ${t.steps} (${STEP_COLUMNS.join(', ')}) SELECT ${values}
    WHERE EXISTS (SELECT 1 FROM ${t.tasks} WHERE id = $${n + 1}::text AND epoch = $${n + 2}::integer AND status IN (${LEASED_SQL}) FOR SHARE)
    ON CONFLICT (task_id, seq) DO UPDATE SET ${STEP_UPSERT_SET}`;
}

/** Collects positional parameters, each with an explicit SQL type. */
export class Params {
  readonly values: unknown[] = [];
  add(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }
}

/**
 * The workflows (and, where listed, only those versions) a claiming worker serves, as a condition
 * on `workflow` / `workflow_version`.
 */
export function servedSql(p: Params, workflows: readonly string[], versions: Readonly<Record<string, readonly string[]>> | undefined): string {
  const any = workflows.filter((wf) => !versions?.[wf]);
  const names: string[] = [];
  const vers: string[] = [];
  for (const wf of workflows) for (const v of versions?.[wf] ?? []) {
    names.push(wf);
    vers.push(v);
  }
  const parts: string[] = [];
  if (any.length) parts.push(`workflow = ANY(${p.add(any, 'text[]')})`);
  if (names.length) parts.push(`(workflow, workflow_version) IN (SELECT * FROM unnest(${p.add(names, 'text[]')}, ${p.add(vers, 'text[]')}))`);
  return parts.length ? `(${parts.join(' OR ')})` : 'FALSE';
}

/** Quoted, schema-qualified table names. */
export interface Tables {
  tasks: string;
  steps: string;
  history: string;
  signals: string;
  workflows: string;
}
