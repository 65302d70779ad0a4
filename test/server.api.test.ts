import { describe, expect, it } from 'vitest';
import { workflow, type EngineOptions } from '../src/index.ts';
import { createServer, ServerMetrics } from '../src/server/index.ts';
import { eventually, gate, makeEngine, startWorker, transitionsOf, waitForStatus } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';
import { ticket } from './fixtures/server-workflows.ts';

const echo = workflow('echo', async (ctx, input: unknown) => ctx.step('say', () => ({ said: input })));

function setup(options: { workflows?: EngineOptions['workflows'] } = {}) {
  const metrics = new ServerMetrics();
  const engine = makeEngine({ workflows: options.workflows ?? [echo], observers: [metrics.observer] });
  const server = createServer(engine, { tokens: TOKENS, bodyLimitBytes: 64 * 1024, metrics });
  return { engine, server, metrics };
}

describe('HTTP API: tasks', () => {
  it('starts a task as the authenticated identity and returns the first task for a repeated Idempotency-Key', async () => {
    const { engine, server } = setup();
    const first = await call(server, 'POST', '/api/tasks', { as: 'oscar', body: { workflow: 'echo', input: { n: 1 } }, headers: { 'idempotency-key': 'order-1' } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ workflow: 'echo', status: 'pending', created: true });
    const again = await call(server, 'POST', '/api/tasks', { as: 'oscar', body: { workflow: 'echo', input: { n: 1 } }, headers: { 'idempotency-key': 'order-1' } });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, created: false });
    const other = await call(server, 'POST', '/api/tasks', { as: 'oscar', body: { workflow: 'echo', input: { n: 2 } }, headers: { 'idempotency-key': 'order-1' } });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('IDEMPOTENCY_CONFLICT');
    const info = await engine.get(first.body.id);
    expect(transitionsOf(info)[0]?.actor).toEqual({ kind: 'user', id: 'oscar' });
  });

  it('never takes the actor from the body: a body naming `by` is refused', async () => {
    const { server } = setup();
    const res = await call(server, 'POST', '/api/tasks', { as: 'oscar', body: { workflow: 'echo', by: 'ada' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_ARGUMENT');
    expect(res.body.error.message).toContain('by');
  });

  it('answers 401 without a valid token and 403 for a role that may not, naming the roles that may', async () => {
    const { server } = setup();
    expect((await call(server, 'GET', '/api/tasks', { as: null })).status).toBe(401);
    expect((await call(server, 'GET', '/api/tasks', { as: null, headers: { authorization: 'Bearer not-a-token-at-all' } })).status).toBe(401);
    expect((await call(server, 'GET', '/api/tasks', { as: null, headers: { authorization: 'Basic dmVyYTp4' } })).status).toBe(401);
    const viewer = await call(server, 'POST', '/api/tasks', { as: 'vera', body: { workflow: 'echo' } });
    expect(viewer.status).toBe(403);
    expect(viewer.body.error.requiredRoles).toEqual(['operator', 'admin']);
    const approver = await call(server, 'POST', '/api/tasks', { as: 'alice', body: { workflow: 'echo' } });
    expect(approver.status).toBe(403);
    expect((await call(server, 'GET', '/api/tasks', { as: 'vera' })).status).toBe(200);
  });

  it('lists, gets and pages tasks; 404 for an unknown id, 400 for a malformed one or a bad filter', async () => {
    const { server } = setup();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: i } })).body.id);
    const page1 = await call(server, 'GET', '/api/tasks?limit=2', { as: 'vera' });
    expect(page1.status).toBe(200);
    expect(page1.body.tasks.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[1]]);
    const page2 = await call(server, 'GET', `/api/tasks?limit=2&cursor=${page1.body.nextCursor}`, { as: 'vera' });
    expect(page2.body.tasks.map((t: { id: string }) => t.id)).toEqual([ids[0]]);
    expect(page2.body.nextCursor).toBeNull();
    const one = await call(server, 'GET', `/api/tasks/${ids[0]}`, { as: 'vera' });
    expect(one.body).toMatchObject({ id: ids[0], status: 'pending', input: 0, legalEvents: ['cancel', 'pause'] });
    expect((await call(server, 'GET', '/api/tasks/0000000000000000000000000z')).status).toBe(404);
    expect((await call(server, 'GET', '/api/tasks/..%2F..%2Fetc')).status).toBe(400);
    expect((await call(server, 'GET', '/api/tasks?status=bogus')).status).toBe(400);
    expect((await call(server, 'GET', '/api/tasks?limit=0')).status).toBe(400);
    expect((await call(server, 'GET', '/api/tasks?status=pending,failed')).body.tasks).toHaveLength(3);
  });

  it('answers 409 with the legal actions for an illegal transition, and honours Idempotency-Key on commands', async () => {
    const { engine, server } = setup();
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 1 } });
    const paused = await call(server, 'POST', `/api/tasks/${t.id}/pause`, { as: 'oscar', headers: { 'idempotency-key': 'p-1' } });
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe('paused');
    // The same POST again gets the first answer instead of a 409 (the task is already paused).
    const replay = await call(server, 'POST', `/api/tasks/${t.id}/pause`, { as: 'oscar', headers: { 'idempotency-key': 'p-1' } });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(paused.body);
    const illegal = await call(server, 'POST', `/api/tasks/${t.id}/pause`, { as: 'oscar' });
    expect(illegal.status).toBe(409);
    expect(illegal.body.error).toMatchObject({ code: 'ILLEGAL_TRANSITION', legalEvents: ['cancel', 'resume'] });
    expect(server.idempotencyHits).toBe(1);
    expect(transitionsOf(await engine.get(t.id)).filter((e) => e.event === 'pause')).toHaveLength(1);
    const resumed = await call(server, 'POST', `/api/tasks/${t.id}/resume`, { as: 'oscar' });
    expect(resumed.body.status).toBe('pending');
    const cancelled = await call(server, 'POST', `/api/tasks/${t.id}/cancel`, { as: 'oscar', body: { reason: 'not needed' } });
    expect(cancelled.body).toMatchObject({ status: 'cancelled', cancelReason: 'not needed' });
    const retry = await call(server, 'POST', `/api/tasks/${t.id}/retry`, { as: 'oscar' });
    // A cancelled task runs again only from a named step (a re-run).
    expect(retry.status).toBe(409);
    expect(retry.body.error).toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('fromStep') });
  });

  it('sends signals with the identity as actor, once per key, and refuses a typo with requireWaiting', async () => {
    const approved = workflow('wait-approval', async (ctx) => {
      const e = await ctx.waitForEvent<{ ok: boolean }>('approved');
      return ctx.step('after', () => e);
    });
    const { engine, server } = setup({ workflows: [approved] });
    await startWorker(engine);
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'wait-approval' } });
    await waitForStatus(engine, t.id, 'waiting');
    const typo = await call(server, 'POST', `/api/tasks/${t.id}/signals/aproved`, { as: 'oscar', body: { payload: {}, requireWaiting: true } });
    expect(typo.status).toBe(409);
    const sent = await call(server, 'POST', `/api/tasks/${t.id}/signals/approved`, { as: 'oscar', body: { payload: { ok: true } }, headers: { 'idempotency-key': 's-1' } });
    expect(sent.status).toBe(202);
    expect(sent.body).toEqual({ created: true, delivered: 'waiting', status: 'waiting' });
    const again = await call(server, 'POST', `/api/tasks/${t.id}/signals/approved`, { as: 'oscar', body: { payload: { ok: true } }, headers: { 'idempotency-key': 's-1' } });
    expect(again.body.created).toBe(false);
    await waitForStatus(engine, t.id, 'succeeded');
    const info = await engine.get(t.id);
    const received = info.history.filter((e) => e.type === 'signal:received');
    expect(received).toHaveLength(1);
    expect(received[0]?.actor).toEqual({ kind: 'user', id: 'oscar' });
  });

  it('starts a batch, one result per item, with per-item keys derived from the header', async () => {
    const { server } = setup();
    const batch = { tasks: [{ workflow: 'echo', input: 1 }, { workflow: 'nope' }, { workflow: 'echo', input: 3 }] };
    const res = await call(server, 'POST', '/api/tasks/batch', { body: batch, headers: { 'idempotency-key': 'b-1' } });
    expect(res.status).toBe(200);
    expect(res.body.results[0].task.created).toBe(true);
    expect(res.body.results[1]).toMatchObject({ status: 404, error: { code: 'WORKFLOW_NOT_FOUND' } });
    const again = await call(server, 'POST', '/api/tasks/batch', { body: batch, headers: { 'idempotency-key': 'b-1' } });
    expect(again.body.results[0].task).toMatchObject({ id: res.body.results[0].task.id, created: false });
    expect(again.body.results[2].task).toMatchObject({ id: res.body.results[2].task.id, created: false });
  });

  it('deletes a finished task (DELETE) and purges finished tasks (POST /api/tasks/purge): admins only, with the identity as actor', async () => {
    const seen: Array<{ reason: string; by: unknown; ids: string[] }> = [];
    const metrics = new ServerMetrics();
    const engine = makeEngine({ workflows: [echo], observers: [metrics.observer, { onTasksDeleted: (e) => void seen.push({ reason: e.reason, by: e.by, ids: e.tasks.map((t) => t.id) }) }] });
    const server = createServer(engine, { tokens: TOKENS, metrics });
    await startWorker(engine);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: i } })).body.id);
    for (const id of ids) await waitForStatus(engine, id, 'succeeded');
    const [first, second, third] = ids as [string, string, string];

    for (const who of ['vera', 'oscar', 'alice']) {
      const refused = await call(server, 'DELETE', `/api/tasks/${first}`, { as: who });
      expect(refused.status, who).toBe(403);
      expect(refused.body.error.requiredRoles).toEqual(['admin']);
      expect((await call(server, 'POST', '/api/tasks/purge', { as: who, body: { olderThan: 0 } })).status, who).toBe(403);
    }
    const deleted = await call(server, 'DELETE', `/api/tasks/${first}`, { as: 'ada' });
    expect(deleted.status).toBe(200);
    expect(deleted.body.deleted).toMatchObject({ id: first, workflow: 'echo', status: 'succeeded', output: { said: 0 } });
    expect((await call(server, 'GET', `/api/tasks/${first}`, { as: 'vera' })).status).toBe(404);
    expect((await call(server, 'DELETE', `/api/tasks/${first}`)).status).toBe(404);
    expect((await call(server, 'DELETE', '/api/tasks/not%20an%20id')).status).toBe(400);

    const dry = await call(server, 'POST', '/api/tasks/purge', { body: { olderThan: '0s', dryRun: true } });
    expect(dry).toMatchObject({ status: 200, body: { count: 2, byStatus: { succeeded: 2, failed: 0, cancelled: 0 }, dryRun: true } });
    expect((await call(server, 'POST', '/api/tasks/purge', { body: { olderThan: 0, workflow: 'echo', limit: 1 } })).body).toMatchObject({ count: 1 });
    for (const body of [{}, { olderThan: 'soon' }, { olderThan: 0, status: 'running' }, { olderThan: 0, by: 'someone' }]) {
      const bad = await call(server, 'POST', '/api/tasks/purge', { body });
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error.code).toBe('INVALID_ARGUMENT');
    }
    const waiting = (await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 9, delayMs: 3_600_000 } })).body.id;
    const conflict = await call(server, 'DELETE', `/api/tasks/${waiting}`);
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('CONFLICT');
    // The purge with a limit of 1 took the older of the two left.
    expect(seen).toEqual([
      { reason: 'delete', by: { kind: 'user', id: 'ada' }, ids: [first] },
      { reason: 'purge', by: { kind: 'user', id: 'ada' }, ids: [second] },
    ]);
    expect((await engine.get(third)).status).toBe('succeeded');
  });

  it("sends a state machine's events as the identity, refusing with 409 and the events it takes what its state does not take", async () => {
    const { engine, server } = setup({ workflows: [ticket] });
    await startWorker(engine);
    const { id } = (await call(server, 'POST', '/api/tasks', { body: { workflow: 'ticket', input: { subject: 'login fails' } } })).body;
    await eventually(async () => (await engine.get(id)).machine?.legalEvents.length === 2, 10_000, 'the ticket open');
    const task = (await call(server, 'GET', `/api/tasks/${id}`, { as: 'vera' })).body;
    expect(task.machine).toMatchObject({ state: 'open', legalEvents: ['resolve', 'escalate'], context: { subject: 'login fails' } });

    expect((await call(server, 'POST', `/api/tasks/${id}/send/escalate`, { as: 'vera', body: {} })).status).toBe(403);
    const wrong = await call(server, 'POST', `/api/tasks/${id}/send/reopen`, { as: 'oscar', body: {} });
    expect(wrong.status).toBe(409);
    expect(wrong.body.error).toMatchObject({ code: 'EVENT_REFUSED', legalEvents: ['resolve', 'escalate'] });
    expect((await call(server, 'POST', `/api/tasks/${id}/send/bad%20name`, { as: 'oscar', body: {} })).status).toBe(400);

    const sent = await call(server, 'POST', `/api/tasks/${id}/send/escalate`, { as: 'oscar', body: {}, headers: { 'idempotency-key': 'esc-1' } });
    expect(sent).toMatchObject({ status: 202, body: { created: true, state: 'open', delivered: 'accepted' } });
    expect((await call(server, 'POST', `/api/tasks/${id}/send/escalate`, { as: 'oscar', body: {}, headers: { 'idempotency-key': 'esc-1' } })).body).toMatchObject({ created: false });
    await eventually(async () => (await engine.get(id)).machine?.history.length === 3 && (await engine.get(id)).machine?.legalEvents.length === 2, 10_000, 'open again, escalated');
    // Escalated once: the guard refuses a second escalation.
    const again = await call(server, 'POST', `/api/tasks/${id}/send/escalate`, { as: 'oscar', body: {} });
    expect(again.body.error).toMatchObject({ code: 'EVENT_REFUSED' });
    expect((await call(server, 'POST', `/api/tasks/${id}/send/resolve`, { as: 'oscar', body: { payload: { note: 'reset password' } } })).status).toBe(202);
    expect(await engine.result(id)).toEqual({ state: 'closed', context: { subject: 'login fails', escalated: true, resolution: 'reset password' } });
    const info = await engine.get(id);
    expect(info.machine?.history.map((h) => [h.event, h.by?.id ?? null])).toEqual([
      [null, null],
      ['triaged', 'entry-action'],
      ['escalate', 'oscar'],
      ['resolve', 'oscar'],
    ]);
  });

  it('refuses bad JSON with 400, a body over the limit with 413, and an unknown route with 404', async () => {
    const { server } = setup();
    const bad = await call(server, 'POST', '/api/tasks', { raw: '{"workflow": ' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toMatch(/not valid JSON/);
    const big = await call(server, 'POST', '/api/tasks', { raw: JSON.stringify({ workflow: 'echo', input: 'x'.repeat(70 * 1024) }) });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    expect((await call(server, 'GET', '/api/nothing')).status).toBe(404);
    expect((await call(server, 'DELETE', '/api/tasks')).status).toBe(405);
  });
});

describe('HTTP API: event stream', () => {
  it('streams a task log as SSE with seq ids, ends when the task succeeds, and resumes after Last-Event-ID', async () => {
    const { engine, server } = setup();
    await startWorker(engine);
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 'hi' } });
    await waitForStatus(engine, t.id, 'succeeded');
    const read = async (headers: Record<string, string>) => {
      const res = await server.app.request(`http://localhost/api/tasks/${t.id}/events`, { headers: { authorization: `Bearer ${TOKENS[0]?.token}`, ...headers } });
      expect(res.headers.get('content-type')).toContain('text/event-stream');
      return parseSse(await res.text());
    };
    const all = await read({});
    const entries = all.filter((m) => m.id !== undefined);
    const total = (await engine.get(t.id)).history.length;
    expect(entries.map((m) => Number(m.id))).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(all[all.length - 1]?.event).toBe('end');
    expect(JSON.parse(entries[0]?.data as string)).toMatchObject({ seq: 1, type: 'transition', event: 'create' });
    const resumed = (await read({ 'last-event-id': '2' })).filter((m) => m.id !== undefined);
    expect(resumed.map((m) => Number(m.id))).toEqual(Array.from({ length: total - 2 }, (_, i) => i + 3));
    expect((await call(server, 'GET', '/api/tasks/0000000000000000000000000z/events')).status).toBe(404);
    expect((await call(server, 'GET', `/api/tasks/${t.id}/events`, { headers: { 'last-event-id': 'abc' } })).status).toBe(400);
  });

  it('follows a running task live: entries arrive while the step runs', async () => {
    const release = gate();
    const slow = workflow('slow', async (ctx) => {
      await ctx.step('first', () => 1);
      await ctx.step('second', () => release.promise.then(() => 2));
    });
    const { engine, server } = setup({ workflows: [slow] });
    await startWorker(engine);
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'slow' } });
    const res = await server.app.request(`http://localhost/api/tasks/${t.id}/events`, { headers: { authorization: `Bearer ${TOKENS[0]?.token}` } });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    const decoder = new TextDecoder();
    await eventually(
      async () => {
        const { value } = await reader.read();
        text += decoder.decode(value);
        return text.includes('"name":"first"');
      },
      10_000,
      'the first step in the stream',
    );
    expect(text).not.toContain('"event":"complete"');
    release.open();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toContain('"event":"complete"');
    expect(text).toContain('event: end');
  });
});

describe('HTTP API: documentation, health and metrics', () => {
  it('publishes an OpenAPI document whose request schemas come from the validating zod schemas', async () => {
    const { server } = setup();
    const doc = (await call(server, 'GET', '/api/openapi.json', { as: 'vera' })).body;
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.paths['/api/tasks/{id}'].delete['x-permission']).toBe('delete');
    expect(Object.keys(doc.paths['/api/tasks/purge'].post.requestBody.content['application/json'].schema.properties).sort()).toEqual(['dryRun', 'limit', 'olderThan', 'status', 'workflow']);
    for (const p of [
      '/api/tasks',
      '/api/tasks/batch',
      '/api/tasks/purge',
      '/api/tasks/{id}',
      '/api/tasks/{id}/cancel',
      '/api/tasks/{id}/retry',
      '/api/tasks/{id}/pause',
      '/api/tasks/{id}/resume',
      '/api/tasks/{id}/signals/{name}',
      '/api/tasks/{id}/events',
    ]) {
      expect(doc.paths[p], p).toBeDefined();
    }
    const start = doc.paths['/api/tasks'].post.requestBody.content['application/json'].schema;
    expect(start.required).toEqual(['workflow']);
    expect(start.additionalProperties).toBe(false);
    expect(Object.keys(start.properties).sort()).toEqual(['debounce', 'delayMs', 'idempotencyKey', 'input', 'priority', 'singleton', 'tags', 'title', 'version', 'workflow']);
    expect(doc.paths['/api/tasks'].get.parameters.map((p: { name: string }) => p.name)).toEqual([
      'status',
      'workflow',
      'parent',
      'tags',
      'createdAfter',
      'createdBefore',
      'failedWith',
      'text',
      'limit',
      'cursor',
    ]);
  });

  it('answers /healthz without a token and /metrics with tasks by status and step durations', async () => {
    const { engine, server } = setup();
    await startWorker(engine);
    expect((await call(server, 'GET', '/healthz', { as: null })).body).toEqual({ ok: true });
    expect((await call(server, 'GET', '/metrics', { as: null })).status).toBe(401);
    const { body: t } = await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 1 } });
    await waitForStatus(engine, t.id, 'succeeded');
    await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 2 }, headers: { 'idempotency-key': 'k' } });
    await call(server, 'POST', '/api/tasks', { body: { workflow: 'echo', input: 2 }, headers: { 'idempotency-key': 'k' } });
    await eventually(
      async () => /stepwise_step_duration_seconds_count\{workflow="echo",step="say",outcome="completed"\} 1/.test((await call(server, 'GET', '/metrics', { as: 'vera' })).body as string),
      10_000,
      'the step histogram',
    );
    const text = (await call(server, 'GET', '/metrics', { as: 'vera' })).body as string;
    expect(text).toMatch(/stepwise_tasks\{status="succeeded"\} [12]/);
    expect(text).toContain('stepwise_idempotency_hits_total 1');
    expect(text).toMatch(/stepwise_runs_total\{workflow="echo",status="succeeded"\} 1/);
    expect(text).toMatch(/stepwise_wake_latency_seconds_count 1/);
    expect(text).toMatch(/stepwise_http_requests_total\{method="POST",status="201"\} 2/);
  });
});

function parseSse(text: string): Array<{ id?: string; event?: string; data?: string }> {
  return text
    .split('\n\n')
    .filter((b) => b.trim() && !b.startsWith(':'))
    .map((block) => {
      const m: { id?: string; event?: string; data?: string } = {};
      for (const line of block.split('\n')) {
        const i = line.indexOf(':');
        const k = line.slice(0, i);
        const v = line.slice(i + 1).replace(/^ /, '');
        if (k === 'id' || k === 'event' || k === 'data') m[k] = v;
      }
      return m;
    });
}
