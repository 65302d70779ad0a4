// The approval routes over the engine's approvals (workflows that call ctx.approval): the decider
// is the token's identity, the role and the approval's approver list are both enforced, a repeat
// with another decision conflicts, and the engine's NOT_FOUND and TASK_ENDED come back through the
// HTTP status table. The dashboard's task page shows the approval from engine.get(id).approvals.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, HTTP_STATUS, type ApprovalInfo } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { FAST, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';
import { review } from './fixtures/server-workflows.ts';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-approvals-'));
  const engine = new Engine({ store: `sqlite:${join(dir, 'a.db')}`, workflows: [review] });
  cleanup.push(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await engine.worker(FAST).start();
  return { engine, server: createServer(engine, { tokens: TOKENS }) };
}

/** Starts a review and returns it once its approval is pending. */
async function waitingReview(engine: Engine, title: string): Promise<{ taskId: string; approval: ApprovalInfo }> {
  const t = await engine.start(review, { title });
  await waitForStatus(engine, t.id, 'waiting');
  const [approval] = (await engine.get(t.id)).approvals;
  if (!approval) throw new Error(`task ${t.id} waits without an approval`);
  return { taskId: t.id, approval };
}

describe('HTTP API: approvals', () => {
  it('lists approvals by the real statuses (mine=true is the caller) and decides as the authenticated approver with edited data', async () => {
    const { engine, server } = await setup();
    const { taskId, approval } = await waitingReview(engine, 'x');
    expect(approval).toMatchObject({ taskId, name: 'publish', status: 'pending', approvers: ['alice'], payload: { text: 'Draft about x' } });

    const mine = await call(server, 'GET', '/api/approvals?mine=true&status=pending', { as: 'alice' });
    expect(mine.status).toBe(200);
    expect(mine.body.approvals.map((a: ApprovalInfo) => a.id)).toEqual([approval.id]);
    expect(mine.body.approvals[0]).toMatchObject({ taskId, workflow: 'review', payload: { text: 'Draft about x' }, decisions: [] });
    expect((await call(server, 'GET', '/api/approvals?mine=true', { as: 'vera' })).body.approvals).toEqual([]);
    expect((await call(server, 'GET', '/api/approvals?status=approved,rejected')).body.approvals).toEqual([]);
    expect((await call(server, 'GET', `/api/approvals?taskId=${taskId}&status=pending,escalated`)).body.approvals).toHaveLength(1);
    // A status that approvals do not have is a 400 naming the field, not an empty list.
    const bad = await call(server, 'GET', '/api/approvals?status=waiting');
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain('status');

    const ok = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', body: { approve: true, comment: 'fine', data: { text: 'edited' } } });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ id: approval.id, status: 'approved', decisions: [{ by: 'alice', approve: true, comment: 'fine', data: { text: 'edited' } }] });
    expect(await engine.result(taskId)).toEqual({ published: true, text: 'edited', by: 'alice' });
    const decision = (await engine.get(taskId)).history.find((e) => e.type === 'approval:decision');
    expect(decision?.actor).toEqual({ kind: 'user', id: 'alice' });
    expect(server.openapi.paths).toHaveProperty(['/api/approvals/{id}/decide']);
  });

  it('takes the decider from the token: a body naming someone is refused, a role without the right or a name off the list is FORBIDDEN', async () => {
    const { engine, server } = await setup();
    const { taskId, approval } = await waitingReview(engine, 'y');
    const named = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', body: { approve: true, by: 'ada' } });
    expect(named.status).toBe(400);
    expect(named.body.error.code).toBe('INVALID_ARGUMENT');
    // An operator's role has no right to decide; an admin has it but is not on the approver list (the engine's FORBIDDEN).
    expect((await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'oscar', body: { approve: true } })).status).toBe(403);
    const admin = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'ada', body: { approve: true } });
    expect(admin.status).toBe(403);
    expect(admin.body.error.code).toBe('FORBIDDEN');
    const info = await engine.get(taskId);
    expect(info.status).toBe('waiting');
    expect(info.approvals[0]).toMatchObject({ status: 'pending', decisions: [] });
  });

  it('replays a decision sent again with its Idempotency-Key and answers a contrary one with 409 CONFLICT', async () => {
    const { engine, server } = await setup();
    const { taskId, approval } = await waitingReview(engine, 'z');
    const headers = { 'idempotency-key': 'reject-z-1' };
    const first = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', headers, body: { approve: false, comment: 'off topic' } });
    expect(first.status).toBe(200);
    expect(first.body.status).toBe('rejected');
    const again = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', headers, body: { approve: false, comment: 'off topic' } });
    expect(again.status).toBe(200);
    expect(again.body.decisions).toEqual(first.body.decisions);
    const contrary = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', body: { approve: true } });
    expect(contrary.status).toBe(409);
    expect(contrary.body.error.code).toBe('CONFLICT');
    expect(await engine.result(taskId)).toEqual({ published: false, by: 'alice', comment: 'off topic' });
    expect((await engine.get(taskId)).history.filter((e) => e.type === 'approval:decision')).toHaveLength(1);
  });

  it('answers an unknown approval with 404 NOT_FOUND and a decision on a cancelled task with 409 TASK_ENDED', async () => {
    expect(HTTP_STATUS.NOT_FOUND).toBe(404);
    expect(HTTP_STATUS.TASK_ENDED).toBe(409);
    const { engine, server } = await setup();
    const unknown = await call(server, 'POST', '/api/approvals/apv_00000000000000000000000000/decide', { as: 'alice', body: { approve: true } });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
    const { taskId, approval } = await waitingReview(engine, 'w');
    expect((await call(server, 'POST', `/api/tasks/${taskId}/cancel`, { as: 'oscar', body: { reason: 'not needed' } })).status).toBe(200);
    await waitForStatus(engine, taskId, 'cancelled');
    const ended = await call(server, 'POST', `/api/approvals/${approval.id}/decide`, { as: 'alice', body: { approve: true } });
    expect(ended.status).toBe(409);
    expect(ended.body.error).toMatchObject({ code: 'TASK_ENDED', status: 'cancelled' });
    expect((await engine.get(taskId)).history.filter((e) => e.type === 'approval:decision')).toEqual([]);
  });

  it("shows the task's approval on its dashboard page: payload, approvers, a form for the approver only, then the decision", async () => {
    const { engine, server } = await setup();
    const { taskId, approval } = await waitingReview(engine, '<b>bold</b>');
    const asAlice = await call(server, 'GET', `/tasks/${taskId}`, { as: 'alice' });
    expect(asAlice.status).toBe(200);
    const html = asAlice.body as string;
    expect(html).toContain(`data-approval-id="${approval.id}" data-approval-status="pending"`);
    expect(html).toContain('approvers: alice');
    expect(html).toContain('Draft about &lt;b&gt;bold&lt;/b&gt;');
    expect(html).not.toContain('<b>bold</b>');
    expect(html).toContain(`<div class="decide" data-approval="${approval.id}">`);
    // An admin may decide in general but is not on this approval's list: no form for it.
    expect((await call(server, 'GET', `/tasks/${taskId}`, { as: 'ada' })).body).not.toContain('class="decide"');
    await engine.decide(approval.id, { approve: true, by: 'alice', comment: 'ship it' });
    await waitForStatus(engine, taskId, 'succeeded');
    const after = (await call(server, 'GET', `/tasks/${taskId}`, { as: 'alice' })).body as string;
    expect(after).toContain('data-approval-status="approved"');
    expect(after).toContain('<li data-by="alice">');
    expect(after).toContain('ship it');
    expect(after).not.toContain('class="decide"');
    // "Waiting on me" lists only tasks with an open approval the caller may decide.
    const { taskId: open } = await waitingReview(engine, 'v');
    const list = (await call(server, 'GET', '/?view=mine', { as: 'alice' })).body as string;
    expect(list).toContain(`data-task="${open}"`);
    expect(list).not.toContain(`data-task="${taskId}"`);
    expect((await call(server, 'GET', '/?view=mine', { as: 'ada' })).body).not.toContain(`data-task="${open}"`);
  });
});
