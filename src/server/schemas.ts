/**
 * @module server/schemas
 * The zod schemas of every request the API accepts: the same objects validate requests
 * (`validate`) and generate the OpenAPI document (`openapi.ts`), so the two cannot disagree.
 * The engine checks values again (sizes, text rules, workflow input schemas); these schemas
 * catch wrong shapes and types first, with the path of the offending field.
 */
import { z } from 'zod';
import { ALERT_KINDS, ALL_STATUSES, InvalidArgumentError, type ApprovalStatus } from '../index.ts';

/** Task ids are 26 Crockford base32 characters; anything close enough is looked up, anything else refused. */
export const TaskId = z.string().regex(/^[0-9A-Za-z]{1,64}$/, 'a task id is 1-64 letters and digits');
export const ApprovalId = z.string().regex(/^[0-9A-Za-z_-]{1,128}$/, 'an approval id is 1-128 letters, digits, "_" or "-"');
export const SignalName = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^|]+$/, 'a signal name has no "|"');
const Key = z.string().min(1).max(255);
/** The rule `workflow(name)` applies to names: a filter or start naming anything else cannot match. */
export const WorkflowName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$/, 'a workflow name is 1-200 letters, digits and . _ : / - (starting with a letter or digit)');

/** A duration of a start option: milliseconds, or a string such as '30s' (the engine checks it). */
const StartDuration = z.union([z.number().int().min(0), z.string().max(50)]);

/** Any JSON value: input, signal payloads and decision data are the workflow's business. */
export const Json = z.unknown().describe('any JSON value');

export const StartBody = z
  .object({
    workflow: WorkflowName.describe('the registered workflow name'),
    input: Json.optional(),
    idempotencyKey: Key.optional().describe('same key → the first task is returned (201 then 200)'),
    delayMs: z.number().int().min(0).max(3_155_760_000_000).optional().describe('do not run before this many milliseconds'),
    title: z.string().optional().describe('a short text naming the task in lists (1-200 characters)'),
    debounce: z
      .object({
        key: Key,
        period: StartDuration.describe('how long after the last start the task becomes due'),
        maxWait: StartDuration.optional().describe('due at most this long after the first start'),
      })
      .strict()
      .optional()
      .describe('starts of the workflow with this key within the period are one task, with the last input (200 with the same task once one exists)'),
    singleton: z
      .union([Key, z.object({ key: Key, mode: z.enum(['refuse', 'join']).optional() }).strict()])
      .optional()
      .describe("at most one live task of the workflow per key: a second start is refused (409 SINGLETON_RUNNING) or, with mode 'join', answered with it (200)"),
    priority: z.number().int().min(0).max(1000).optional().describe("0..1000, higher first among due tasks (a priority p counts as p seconds of waiting); default: the workflow's"),
    tags: z.record(z.string(), z.string()).optional().describe('tags to find the task by: { tenant: "acme" } (at most 32; keys a letter then letters, digits, _ . : -)'),
    version: z.string().min(1).max(100).optional().describe('pin the task to this workflow version (one a worker runs or has run)'),
  })
  .strict();

export const BatchBody = z.object({ tasks: z.array(StartBody).min(1).max(100) }).strict();

export const CancelBody = z.object({ reason: z.string().max(1000).optional() }).strict();

const FinalStatus = z.enum(['succeeded', 'failed', 'cancelled']);
export const PurgeBody = z
  .object({
    olderThan: z.union([z.number().int().min(0), z.string().min(1).max(50)]).describe("finished at least this long ago: milliseconds or a duration such as '30d' (0: every finished task)"),
    status: z
      .union([FinalStatus, z.array(FinalStatus).min(1)])
      .optional()
      .describe('final statuses to delete (default: all three)'),
    workflow: z.union([WorkflowName, z.array(WorkflowName).min(1).max(100)]).optional(),
    dryRun: z.boolean().optional().describe('count, delete nothing'),
    limit: z.number().int().min(1).optional(),
  })
  .strict();
export const EmptyBody = z.object({}).strict();

export const SignalBody = z
  .object({
    payload: Json.optional(),
    idempotencyKey: Key.optional(),
    requireWaiting: z.boolean().optional().describe('refuse (409) unless the task waits for this signal'),
  })
  .strict();

/** An event of a state machine: what `engine.send` takes. */
export const EventName = z.string().regex(/^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,99}$/, 'an event name is 1-100 letters, digits and _ . : / -');
export const SendBody = z
  .object({
    payload: Json.optional(),
    idempotencyKey: Key.optional(),
  })
  .strict();

export const DecideBody = z
  .object({
    approve: z.boolean(),
    comment: z.string().max(4000).optional(),
    data: Json.optional().describe('edited data to continue with (an approval may accept it)'),
  })
  .strict();

/**
 * A comma-separated list of `values` in a query string (`status=failed,cancelled`), as an array;
 * `atLeastOne`: the message when the list is empty (else an empty list is allowed).
 */
function commaList<V extends string>(values: readonly [V, ...V[]], atLeastOne?: string) {
  const items = z.array(z.enum(values));
  return z
    .string()
    .max(200)
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .pipe(atLeastOne ? items.min(1, atLeastOne) : items);
}

const StatusList = commaList(ALL_STATUSES as unknown as [string, ...string[]]);

/** `tenant=acme,user=u1` as a tag map (a value cannot hold a comma here; the engine checks keys and values). */
export const TagList = z
  .string()
  .max(10_000)
  .transform((s, ctx) => {
    const tags: Record<string, string> = {};
    for (const pair of s.split(',').filter((p) => p.trim())) {
      const at = pair.indexOf('=');
      if (at <= 0) {
        ctx.addIssue({ code: 'custom', message: `a tag is key=value (tags=tenant=acme,user=u1), got "${pair}"` });
        return z.NEVER;
      }
      tags[pair.slice(0, at).trim()] = pair.slice(at + 1);
    }
    return tags;
  });

/** A time in a query: ms since the epoch, or an ISO date. */
const QueryTime = z.union([
  z
    .string()
    .regex(/^\d{1,15}$/)
    .transform(Number),
  z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}/, 'ms since the epoch or an ISO date (2026-12-01T09:00:00Z)')
    .transform((s, ctx) => {
      const ms = Date.parse(s);
      if (Number.isNaN(ms)) ctx.addIssue({ code: 'custom', message: `not a date: "${s}"` });
      return ms;
    }),
]);

export const ListQuery = z
  .object({
    status: StatusList.optional().describe('comma-separated statuses'),
    workflow: WorkflowName.optional(),
    parent: TaskId.optional().describe('only the children of this task'),
    tags: TagList.optional().describe('comma-separated key=value tags, all of which a task has (tags=tenant=acme,user=u1)'),
    createdAfter: QueryTime.optional().describe('created at or after: ms since the epoch or an ISO date'),
    createdBefore: QueryTime.optional().describe('created before: ms since the epoch or an ISO date'),
    failedWith: z.string().min(1).max(200).optional().describe("failed tasks whose error (or its failed step's error) has this code"),
    text: z.string().min(1).max(200).optional().describe('text in the id, workflow, title, tags, input or error (case-insensitive)'),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
    cursor: TaskId.optional().describe('nextCursor of the previous page'),
  })
  .strict();

export const ScheduleId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'a schedule id is 1-100 letters, digits, ".", "_" or "-", starting with a letter or digit');

const ScheduleFields = {
  workflow: WorkflowName,
  cron: z.string().min(1).max(200).describe('five fields (minute hour day month weekday), or six with seconds first'),
  timezone: z.string().min(1).max(100).optional().describe('an IANA time zone (default UTC)'),
  input: Json.optional(),
  overlap: z.enum(['skip', 'buffer', 'allow', 'cancel']).optional(),
  catchup: z
    .union([z.number().int().min(0), z.string().min(1).max(50), z.literal(false)])
    .optional()
    .describe("how late a missed tick may still start: ms or a duration such as '1h'; false: none"),
  paused: z.boolean().optional(),
};
export const ScheduleBody = z.object({ id: ScheduleId, ...ScheduleFields }).strict();
export const ScheduleUpdateBody = z.object(ScheduleFields).strict();
export const SchedulesQuery = z
  .object({
    workflow: WorkflowName.optional(),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
    cursor: ScheduleId.optional().describe('nextCursor of the previous page'),
  })
  .strict();

export const AlertsQuery = z
  .object({
    kind: commaList(ALERT_KINDS, 'give at least one alert kind')
      .optional()
      .describe(`comma-separated alert kinds (${ALERT_KINDS.join(', ')})`),
    workflow: WorkflowName.optional(),
    taskId: TaskId.optional(),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
    cursor: z
      .string()
      .regex(/^[0-9A-Za-z]{1,64}$/)
      .optional()
      .describe('nextCursor of the previous page'),
  })
  .strict();

/** Every status an approval can have: a record over the engine's ApprovalStatus, so a new one fails the typecheck until listed. */
const APPROVAL_STATUS_SET: Record<ApprovalStatus, true> = { pending: true, escalated: true, approved: true, rejected: true, expired: true };
export const APPROVAL_STATUSES = Object.keys(APPROVAL_STATUS_SET) as [ApprovalStatus, ...ApprovalStatus[]];

const ApprovalStatusList = commaList(APPROVAL_STATUSES, 'give at least one approval status');

export const ApprovalsQuery = z
  .object({
    status: ApprovalStatusList.optional().describe('comma-separated approval statuses (pending, approved, rejected, expired, escalated)'),
    approver: z.string().min(1).max(200).optional(),
    workflow: WorkflowName.optional(),
    taskId: TaskId.optional(),
    mine: z.enum(['true', 'false']).optional().describe('only approvals the caller may decide'),
    limit: z.coerce.number().int().min(1).max(1000).optional(),
  })
  .strict();

/** Parses `value` with `schema`, or throws INVALID_ARGUMENT naming each bad field. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues = r.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
  throw new InvalidArgumentError(`Invalid ${what}: ${issues.join('; ')}.`);
}
