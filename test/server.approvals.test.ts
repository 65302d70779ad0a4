// The approval routes, mounted because the engine has approvals() and decide() (the fixed API of
// the approvals capability; here the test adapter over signals): the decider is the token's
// identity, the role and the approver list are both enforced, and a repeat decision conflicts.
import { afterEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from '../src/server/index.ts';
import { EngineWithApprovals } from './support/approvals-adapter.ts';
import { FAST, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';
import { review } from './fixtures/server-workflows.ts';

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f();
});

async function setup() {
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-approvals-'));
  const engine = new EngineWithApprovals({ store: `sqlite:${join(dir, 'a.db')}`, workflows: [review] });
  cleanup.push(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await engine.worker(FAST).start();
  return { engine, server: createServer(engine, { tokens: TOKENS }) };
}

describe('HTTP API: approvals', () => {
  it('lists approvals (mine=true is the caller) and decides as the authenticated approver', async () => {
    const { engine, server } = await setup();
    const t = await engine.start(review, { title: 'x' });
    await waitForStatus(engine, t.id, 'waiting');
    const mine = await call(server, 'GET', '/api/approvals?mine=true&status=pending', { as: 'alice' });
    expect(mine.status).toBe(200);
    expect(mine.body.approvals.map((a: { taskId: string }) => a.taskId)).toEqual([t.id]);
    expect((await call(server, 'GET', '/api/approvals?mine=true', { as: 'vera' })).body.approvals).toEqual([]);
    // The decider comes from the token: a body naming someone else is refused outright.
    expect((await call(server, 'POST', `/api/approvals/${t.id}/decide`, { as: 'alice', body: { approve: true, by: 'ada' } })).status).toBe(400);
    // An operator's role has no right to decide; an admin has it but is not on the approver list (the engine's FORBIDDEN).
    expect((await call(server, 'POST', `/api/approvals/${t.id}/decide`, { as: 'oscar', body: { approve: true } })).status).toBe(403);
    const admin = await call(server, 'POST', `/api/approvals/${t.id}/decide`, { as: 'ada', body: { approve: true } });
    expect(admin.status).toBe(403);
    expect(admin.body.error.code).toBe('FORBIDDEN');
    const ok = await call(server, 'POST', `/api/approvals/${t.id}/decide`, { as: 'alice', body: { approve: true, comment: 'fine', data: { text: 'edited' } } });
    expect(ok.status).toBe(200);
    expect(ok.body.status).toBe('approved');
    expect(await engine.result(t.id)).toEqual({ published: true, text: 'edited' });
    const again = await call(server, 'POST', `/api/approvals/${t.id}/decide`, { as: 'alice', body: { approve: false } });
    expect(again.status).toBe(409);
    const signals = (await engine.get(t.id)).history.filter((e) => e.type === 'signal:received');
    expect(signals.map((e) => e.actor)).toEqual([{ kind: 'user', id: 'alice' }]);
    expect(server.openapi.paths).toHaveProperty(['/api/approvals/{id}/decide']);
  });

  it('mounts no approval routes on an engine without the approvals capability', async () => {
    const { Engine } = await import('../src/index.ts');
    const dir = mkdtempSync(join(tmpdir(), 'stepwise-approvals-'));
    const engine = new Engine({ store: `sqlite:${join(dir, 'b.db')}` });
    cleanup.push(async () => {
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    });
    const server = createServer(engine, { tokens: TOKENS });
    expect((await call(server, 'GET', '/api/approvals')).status).toBe(404);
    expect(server.openapi.paths).not.toHaveProperty(['/api/approvals']);
  });
});
