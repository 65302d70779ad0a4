/**
 * @module server/mcp/tools
 * The Model Context Protocol server of Stepwise: tools a coding agent (Claude, Cursor, any MCP
 * client) uses to find and look into tasks, and, as far as its identity's role allows, to act on
 * them: list and search, show, explain, read the log and usage, cancel, retry, fork, and list and
 * decide approvals. One server per identity: `stepwise mcp` over stdio (the local user), or
 * streamable HTTP at `/mcp` under `stepwise serve`, where the bearer token's identity and role
 * apply exactly as on the HTTP API. Everything goes through the public engine API; an engine
 * error comes back as a tool error carrying its stable code.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ALL_STATUSES, isStepwiseError, type Engine, type TaskStatus } from '../../index.ts';
import { can, rolesWith, type Identity, type Permission } from '../auth.ts';
import { summarizeApproval, summarizeTask, type SummaryLimits } from '../summaries.ts';
import { listFilter } from '../list-filter.ts';

const Status = z.enum(ALL_STATUSES as unknown as [TaskStatus, ...TaskStatus[]]);
const Id = z.string().min(1).max(64).describe('a task id');
const Time = z.union([z.number().int(), z.string()]).describe('ms since the epoch, or an ISO date');

/** A tool's answer: its value as JSON text (and as structured content). */
function answer(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }], structuredContent: { result: value } as Record<string, unknown> };
}

/** A refusal or an engine error, as a tool error the agent can read: `{ error: { code, message } }`. */
function failure(code: string, message: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: { code, message } }) }] };
}

export interface McpServerOptions {
  /** Who the agent acts as; its role decides which tools act. */
  identity: Identity;
  /** The size bounds of values in answers (as the HTTP API's). */
  limits: SummaryLimits;
  version: string;
}

/** Registers a tool that needs `permission`, its arguments checked strictly, its errors as tool errors. */
type Register = <S extends z.ZodRawShape>(name: string, description: string, permission: Permission, shape: S, run: (args: z.infer<z.ZodObject<S>>) => Promise<unknown>) => void;

function registrar(server: McpServer, identity: Identity): Register {
  return (name, description, permission, shape, run) => {
    server.registerTool(name, { description, inputSchema: z.object(shape).strict() as never }, (async (args: never): Promise<CallToolResult> => {
      if (!can(identity, permission)) {
        return failure('FORBIDDEN', `${identity.name} (${identity.role}) may not use ${name}: it needs the role ${rolesWith(permission).join(' or ')}.`);
      }
      try {
        return answer(await run(args));
      } catch (e) {
        if (isStepwiseError(e)) return failure(e.code, e.message);
        return failure('INTERNAL', e instanceof Error ? e.message : String(e));
      }
    }) as never);
  };
}

/** An MCP server with Stepwise's tools, acting as `identity`. */
export function stepwiseMcpServer(engine: Engine, options: McpServerOptions): McpServer {
  const server = new McpServer({ name: 'stepwise', version: options.version });
  const tool = registrar(server, options.identity);
  taskTools(tool, engine, options.limits);
  actionTools(tool, engine, options.identity, options.limits);
  approvalTools(tool, engine, options.identity, options.limits);
  return server;
}

/** Reading tasks: list and search, show, explain, log, usage. */
function taskTools(tool: Register, engine: Engine, limits: SummaryLimits): void {
  tool(
    'list_tasks',
    'Tasks, newest first, a page at a time: by status, workflow, parent, tags (all must match), creation time, the error code of failed tasks, or text. Pass nextCursor as cursor for the next page.',
    'read',
    {
      status: z.union([Status, z.array(Status)]).optional(),
      workflow: z.string().optional(),
      parent: Id.optional().describe("only this task's children"),
      tags: z.record(z.string(), z.string()).optional(),
      createdAfter: Time.optional(),
      createdBefore: Time.optional(),
      failedWith: z.string().optional().describe('an error code, such as RATE_LIMITED'),
      text: z.string().optional().describe('text in the id, workflow, title, tags, input or error'),
      limit: z.number().int().min(1).max(200).optional(),
      cursor: z.string().optional(),
    },
    async (a) => {
      const { limit, cursor, ...filter } = a;
      const page = await engine.list({ ...listFilter(filter), limit: limit ?? 20, ...(cursor !== undefined ? { cursor } : {}) });
      return { tasks: page.tasks.map((t) => summarizeTask(t, limits.valueBytes).item), nextCursor: page.nextCursor };
    },
  );
  tool('show_task', 'One task: its status, input, output or error, tags, lineage, and its steps (status, attempts, durations, errors).', 'read', { id: Id }, async ({ id }) => {
    const t = await engine.get(id, { history: false });
    return {
      ...summarizeTask(t, limits.valueBytes).item,
      steps: t.steps.map((s) => ({ name: s.name, kind: s.kind, status: s.status, attempts: s.attempts, durationMs: s.durationMs, error: s.error?.message ?? null })),
    };
  });
  tool('explain_task', 'Why a task is (not) moving, and what a person may do now.', 'read', { id: Id }, async ({ id }) => engine.explain(id));
  tool(
    'task_log',
    "A task's log (transitions, steps, signals, approvals, usage), oldest first, after a seq.",
    'read',
    { id: Id, after: z.number().int().min(0).optional(), limit: z.number().int().min(1).max(500).optional() },
    async ({ id, after = 0, limit = 100 }) => {
      const t = await engine.get(id, { steps: false });
      const entries = t.history.filter((e) => e.seq > after).slice(0, limit);
      return { entries, more: t.history.filter((e) => e.seq > after).length > entries.length };
    },
  );
  tool(
    'task_drift',
    "A task's recorded model calls that this server's code would make with another request (prompt, model, tools or settings changed), found by replaying it without calling the model; firstDrift is the step to re-run from (retry_task with fromStep 'first-drift').",
    'read',
    { id: Id },
    async ({ id }) => engine.drift(id),
  );
  tool('task_usage', "A task's model usage: tokens and cost in total and per step, and its budget.", 'read', { id: Id }, async ({ id }) => {
    const t = await engine.get(id, { steps: false, history: false });
    return t.usage ?? { total: null, steps: {} };
  });
}

/** Acting on tasks: cancel, retry, fork. */
function actionTools(tool: Register, engine: Engine, identity: Identity, limits: SummaryLimits): void {
  tool(
    'cancel_task',
    'Cancel a task (its cleanup runs); the reason is recorded.',
    'operate',
    { id: Id, reason: z.string().max(1000).optional() },
    async ({ id, reason }) => summarizeTask(await engine.cancel(id, { by: { kind: 'user', id: identity.name }, ...(reason !== undefined ? { reason } : {}) }), limits.valueBytes).item,
  );
  tool(
    'retry_task',
    "Run a task again: a failed one from the step that failed, or any finished one from fromStep (a step id: name, or name#2; 'first-drift': its first model call the code now makes otherwise).",
    'operate',
    {
      id: Id,
      fromStep: z.string().optional(),
      compensate: z.boolean().optional().describe('with fromStep, for a succeeded task: undo the steps from there on first (their compensations, newest first)'),
    },
    async ({ id, fromStep, compensate }) =>
      summarizeTask(
        await engine.retry(id, { by: { kind: 'user', id: identity.name }, ...(fromStep !== undefined ? { fromStep } : {}), ...(compensate !== undefined ? { compensate } : {}) }),
        limits.valueBytes,
      ).item,
  );
  tool(
    'fork_task',
    "Fork a task into a new one that reuses its recorded steps before fromStep ('first-drift': its first model call the code now makes otherwise), with another input if given; the source is untouched.",
    'operate',
    { id: Id, fromStep: z.string().optional(), input: z.unknown().optional(), tags: z.record(z.string(), z.string()).optional() },
    async ({ id, fromStep, input, tags }) =>
      engine.fork(id, {
        by: { kind: 'user', id: identity.name },
        ...(fromStep !== undefined ? { fromStep } : {}),
        ...(input !== undefined ? { input } : {}),
        ...(tags !== undefined ? { tags } : {}),
      }),
  );
}

/** Approvals: the list, and a decision as the identity. */
function approvalTools(tool: Register, engine: Engine, identity: Identity, limits: SummaryLimits): void {
  tool(
    'list_approvals',
    'Approvals, oldest first: mine=true for the ones this identity may decide now (its name or role listed).',
    'read',
    {
      mine: z.boolean().optional(),
      status: z.array(z.enum(['pending', 'approved', 'rejected', 'expired', 'escalated'])).optional(),
      taskId: Id.optional(),
      limit: z.number().int().min(1).max(200).optional(),
    },
    async ({ mine, status, taskId, limit }) => {
      const approvals = await engine.approvals({
        ...(mine ? { approver: identity.name, roles: [identity.role], status: status ?? ['pending', 'escalated'] } : status ? { status } : {}),
        ...(taskId !== undefined ? { taskId } : {}),
        limit: limit ?? 50,
      });
      return approvals.map((a) => summarizeApproval(a, limits.valueBytes));
    },
  );
  tool(
    'decide_approval',
    'Approve or reject an approval as this identity (only if it is a listed approver, by name or role).',
    'decide',
    { approvalId: z.string().min(1).max(100), approve: z.boolean(), comment: z.string().max(2000).optional(), data: z.unknown().optional() },
    async ({ approvalId, approve, comment, data }) =>
      engine.decide(approvalId, {
        approve,
        by: identity.name,
        roles: [identity.role],
        ...(comment !== undefined ? { comment } : {}),
        ...(data !== undefined ? { data } : {}),
      }),
  );
}
