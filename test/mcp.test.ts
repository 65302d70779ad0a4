// The MCP server, driven by the MCP SDK's own client: `stepwise mcp` as a real process over stdio,
// and streamable HTTP at /mcp under the server, where the bearer token's role decides which tools
// act and an approval is decided as the token's identity.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Engine, workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine, startWorker, tempDir, waitForStatus } from './support/engine.ts';
import { TOKENS, tokenOf } from './support/server.ts';
import { summary } from './fixtures/drift-workflows.ts';

const parked = workflow('parked', async (ctx, input: { topic: string }) => {
  await ctx.step('draft', () => `draft of ${input.topic}`);
  return ctx.waitForEvent('go');
});
const review = workflow('mcp-review', async (ctx) => {
  const d = await ctx.approval('publish', { approvers: ['role:approver'] });
  return d.approved;
});

type ToolAnswer = { isError?: boolean; content: Array<{ type: string; text: string }> };
const parsed = (r: unknown): any => JSON.parse((r as ToolAnswer).content[0]?.text ?? 'null'); // eslint-disable-line @typescript-eslint/no-explicit-any

describe('MCP server', () => {
  it('over stdio: lists its tools, finds a task by tag, shows, explains and cancels it; a bad id or argument is a tool error', async () => {
    const db = `sqlite:${join(tempDir(), 'mcp.db')}`;
    const engine = new Engine({ store: db, workflows: [parked] });
    const worker = engine.worker({ pollIntervalMs: 20 });
    await worker.start();
    const { id } = await engine.start(parked, { topic: 'tides' }, { tags: { tenant: 'acme' } });
    await waitForStatus(engine, id, 'waiting');
    await worker.stop();
    const client = new Client({ name: 'test', version: '1.0.0' });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ['--import', 'tsx', 'src/cli/main.ts', 'mcp', '--db', db, '--as', 'claude'],
      cwd: new URL('..', import.meta.url).pathname,
      stderr: 'pipe',
    });
    await client.connect(transport);
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name).sort();
      expect(tools).toEqual([
        'cancel_task',
        'decide_approval',
        'explain_task',
        'fork_task',
        'list_approvals',
        'list_tasks',
        'retry_task',
        'show_task',
        'task_drift',
        'task_log',
        'task_usage',
      ]);
      const found = parsed(await client.callTool({ name: 'list_tasks', arguments: { tags: { tenant: 'acme' } } }));
      expect(found.tasks.map((t: { id: string }) => t.id)).toEqual([id]);
      const shown = parsed(await client.callTool({ name: 'show_task', arguments: { id } }));
      expect(shown).toMatchObject({ id, status: 'waiting', tags: { tenant: 'acme' } });
      expect(shown.steps.map((s: { name: string }) => s.name)).toEqual(['draft', 'go']);
      expect(parsed(await client.callTool({ name: 'explain_task', arguments: { id } })).summary).toContain('go');
      const log = parsed(await client.callTool({ name: 'task_log', arguments: { id } }));
      expect(log.entries[0]).toMatchObject({ type: 'transition', event: 'create' });

      const missing = (await client.callTool({ name: 'show_task', arguments: { id: 'nope' } })) as ToolAnswer;
      expect(missing.isError).toBe(true);
      expect(parsed(missing).error.code).toBe('TASK_NOT_FOUND');
      const typo = (await client.callTool({ name: 'list_tasks', arguments: { tagz: { tenant: 'acme' } } })) as ToolAnswer;
      expect(typo.isError).toBe(true);

      const cancelled = parsed(await client.callTool({ name: 'cancel_task', arguments: { id, reason: 'asked by the agent' } }));
      expect(cancelled.status).toBe('cancelled');
      const t = await engine.get(id);
      expect(t.cancelReason).toBe('asked by the agent');
      expect(t.history.find((e) => e.type === 'transition' && e.event === 'cancel')?.actor).toEqual({ kind: 'user', id: 'claude' });
    } finally {
      await client.close();
      await engine.close();
    }
  });

  it('over HTTP at /mcp: a viewer reads but may not cancel; an approver decides as itself, another role is refused', async () => {
    const engine = makeEngine({ workflows: [parked, review] });
    const worker = await startWorker(engine);
    const server = createServer(engine, { tokens: TOKENS });
    const { url, close } = await server.listen({ port: 0, hostname: '127.0.0.1' });
    const connect = async (name: string): Promise<Client> => {
      const client = new Client({ name: 'test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${tokenOf(name)}` } } }));
      return client;
    };
    try {
      const { id } = await engine.start(parked, { topic: 'moons' });
      await waitForStatus(engine, id, 'waiting');
      const viewer = await connect('vera');
      expect(parsed(await viewer.callTool({ name: 'list_tasks', arguments: {} })).tasks[0].id).toBe(id);
      const refused = (await viewer.callTool({ name: 'cancel_task', arguments: { id } })) as ToolAnswer;
      expect(refused.isError).toBe(true);
      expect(parsed(refused).error.code).toBe('FORBIDDEN');
      expect((await engine.get(id)).status).toBe('waiting');
      await viewer.close();

      const r = await engine.start(review, {});
      await waitForStatus(engine, r.id, 'waiting');
      const operator = await connect('oscar');
      const queue = parsed(await operator.callTool({ name: 'list_approvals', arguments: { taskId: r.id } }));
      const approvalId = queue[0].id as string;
      const notTheirs = (await operator.callTool({ name: 'decide_approval', arguments: { approvalId, approve: true } })) as ToolAnswer;
      expect(notTheirs.isError).toBe(true);
      expect(parsed(notTheirs).error.code).toBe('FORBIDDEN');
      await operator.close();

      const approver = await connect('alice');
      const mine = parsed(await approver.callTool({ name: 'list_approvals', arguments: { mine: true } }));
      expect(mine.map((a: { id: string }) => a.id)).toContain(approvalId);
      const decided = parsed(await approver.callTool({ name: 'decide_approval', arguments: { approvalId, approve: true, comment: 'ok from the agent' } }));
      expect(decided.status).toBe('approved');
      expect(await engine.result(r.id, { timeout: '10s' })).toBe(true);
      expect((await engine.get(r.id)).approvals[0]?.decisions[0]).toMatchObject({ by: 'alice', comment: 'ok from the agent' });
      await approver.close();

      // Without a token: 401, as on the API.
      const anonymous = await fetch(`${url}/mcp`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(anonymous.status).toBe(401);
    } finally {
      await close();
      await worker.stop();
    }
  });

  it("over stdio with --module: task_drift reports a changed prompt's drift, and retry_task re-runs from 'first-drift'", async () => {
    const db = `sqlite:${join(tempDir(), 'mcp-drift.db')}`;
    const engine = new Engine({ store: db, workflows: [summary] });
    const worker = engine.worker({ pollIntervalMs: 20 });
    await worker.start();
    const client = new Client({ name: 'test', version: '1.0.0' });
    try {
      const { id } = await engine.start(summary, { doc: 'tides' });
      expect(await engine.result(id, { timeout: '20s' })).toBe('answer 1');
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: ['--import', 'tsx', 'src/cli/main.ts', 'mcp', '--db', db, '--as', 'claude', '--module', 'test/fixtures/drift-workflows.ts'],
        cwd: new URL('..', import.meta.url).pathname,
        env: { ...(process.env as Record<string, string>), STEPWISE_TEST_PROMPT: 'Summarise in one line' },
        stderr: 'pipe',
      });
      await client.connect(transport);
      const drift = parsed(await client.callTool({ name: 'task_drift', arguments: { id } }));
      expect(drift).toMatchObject({ taskId: id, firstDrift: 'summarise', drift: [{ step: 'summarise' }] });
      const rerun = parsed(await client.callTool({ name: 'retry_task', arguments: { id, fromStep: 'first-drift' } }));
      expect(rerun.status).toBe('pending');
      expect(await engine.result(id, { timeout: '20s' })).toBe('answer 2');
      expect((await engine.get(id)).history.find((e) => e.type === 'transition' && e.event === 'retry')).toMatchObject({ actor: { id: 'claude' }, detail: { fromStep: 'summarise' } });
    } finally {
      await client.close();
      await worker.stop();
      await engine.close();
    }
  });
});
