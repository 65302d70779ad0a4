// Abuse: thousands of malformed and hostile requests against a real `stepwise serve` process.
// Every answer must be a proper 4xx with a JSON error body, the process must stay up, and no task
// may change (none created, none moved).
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { eventually, tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';
import { TOKENS, tokenOf } from './support/server.ts';

interface Probe {
  kind: string;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

const SQLISH = ["' OR 1=1 --", '"; DROP TABLE tasks; --', "1' UNION SELECT * FROM tasks --", '%27%20OR%201%3D1', "') ; DELETE FROM task_events; --"];
const PATHS = [
  '/api/tasks/../../etc/passwd',
  '/api/tasks/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
  '/api/tasks/%252e%252e%252f',
  '/api/tasks/%00',
  '/api/tasks/a%00b',
  `/api/tasks/${'x'.repeat(5000)}`,
  '/api/tasks/%F0%9F%92%A9',
  '/api/tasks/%ED%A0%80',
  '/api//tasks',
  '/api/tasks/;ls',
  '/api/tasks/$(id)',
  '/API/TASKS',
  '/api/tasks/..%5c..%5c',
  '/api/tasks/__proto__',
  '/api/tasks/constructor/cancel',
  '/api/approvals/..%2f..%2f/decide',
];

function probes(ids: string[], n: number): Probe[] {
  const out: Probe[] = [];
  const op = { authorization: `Bearer ${tokenOf('oscar')}`, 'content-type': 'application/json' };
  const viewer = { authorization: `Bearer ${tokenOf('vera')}`, 'content-type': 'application/json' };
  const realToken = tokenOf('ada');
  const forged = [
    '',
    'Bearer',
    'Bearer ',
    `Bearer ${realToken.slice(0, -1)}`,
    `Bearer ${realToken}x`,
    `Bearer ${realToken.toUpperCase()}`,
    `Basic ${Buffer.from(`ada:${realToken}`).toString('base64')}`,
    `bearer  ${'a'.repeat(5000)}`,
    `Bearer ${realToken} extra`,
    'Bearer null',
    'Bearer undefined',
    `Token ${realToken}`,
    `Bearer ${SQLISH[0]}`,
  ];
  const goodStart = JSON.stringify({ workflow: 'quick', input: { n: 1 } });
  const wrongTypes = [
    { workflow: 123 },
    { workflow: null },
    { workflow: ['quick'] },
    { workflow: '' },
    { workflow: 'x'.repeat(300) },
    { workflow: 'quick', idempotencyKey: 5 },
    { workflow: 'quick', idempotencyKey: '' },
    { workflow: 'quick', delayMs: -1 },
    { workflow: 'quick', delayMs: 'soon' },
    { workflow: 'quick', by: 'ada' },
    [],
    'quick',
    42,
    null,
    true,
    { tasks: 'all' },
    { workflow: SQLISH[1] },
  ].map((v) => JSON.stringify(v));
  wrongTypes.push('{"workflow":"quick","__proto__":{"admin":true}}', '{"workflow":"quick","input":{"n":1},"input":{"n":2},"x":1}');
  let i = 0;
  while (out.length < n) {
    const id = ids[i % ids.length] as string;
    const k = i++ % 14;
    switch (k) {
      case 0: {
        // bad JSON
        const cut = goodStart.slice(0, i % goodStart.length);
        out.push({ kind: 'bad-json', method: 'POST', path: '/api/tasks', headers: op, body: cut.length ? `${cut}\u0000` : '{' });
        break;
      }
      case 1: // wrong types on start
        out.push({ kind: 'wrong-types', method: 'POST', path: '/api/tasks', headers: op, body: wrongTypes[i % wrongTypes.length] });
        break;
      case 2: // wrong types on commands and signals
        out.push({
          kind: 'wrong-types',
          method: 'POST',
          path: [`/api/tasks/${id}/cancel`, `/api/tasks/${id}/signals/approval`, `/api/tasks/${id}/pause`][i % 3] as string,
          headers: op,
          body: JSON.stringify([{ reason: 5 }, { payload: 1, requireWaiting: 'yes' }, { force: true }][i % 3]),
        });
        break;
      case 3: // path tricks
        out.push({ kind: 'path-tricks', method: i % 2 ? 'GET' : 'POST', path: `${PATHS[i % PATHS.length]}${i % 4 === 1 ? '/cancel' : ''}`, headers: op, body: i % 2 ? undefined : '{}' });
        break;
      case 4: // SQL-like strings in ids, filters and names
        out.push({
          kind: 'sql-like',
          method: 'GET',
          path: `/api/tasks?${['status', 'workflow', 'cursor', 'limit'][i % 4]}=${encodeURIComponent(SQLISH[i % SQLISH.length] as string)}`,
          headers: viewer,
        });
        break;
      case 5:
        out.push({ kind: 'sql-like', method: 'POST', path: `/api/tasks/${encodeURIComponent(SQLISH[i % SQLISH.length] as string)}/cancel`, headers: op, body: '{}' });
        break;
      case 6: // missing and forged tokens on writes to real tasks
        out.push({
          kind: 'forged-token',
          method: 'POST',
          path: `/api/tasks/${id}/${['cancel', 'pause', 'retry'][i % 3]}`,
          headers: { 'content-type': 'application/json', ...(forged[i % forged.length] ? { authorization: forged[i % forged.length] as string } : {}) },
          body: '{}',
        });
        break;
      case 7: // a viewer forging writes
        out.push({ kind: 'forbidden-role', method: 'POST', path: i % 2 ? `/api/tasks/${id}/cancel` : '/api/tasks', headers: viewer, body: i % 2 ? '{}' : goodStart });
        break;
      case 8: // huge bodies (over the 1 MiB default), sometimes with a lying content-length omitted
        out.push({
          kind: 'huge-body',
          method: 'POST',
          path: i % 2 ? '/api/tasks' : `/api/tasks/${id}/signals/approval`,
          headers: op,
          body: Math.floor(i / 14) % 20 === 0 ? `{"input":"${'x'.repeat(1_100_000)}"}` : `{"workflow":"quick","input":"${'y'.repeat(2000)}", "extra": true}`,
        });
        break;
      case 9: // bad Last-Event-ID and after on the event stream
        out.push({
          kind: 'bad-sse',
          method: 'GET',
          path: `/api/tasks/${id}/events${i % 2 ? '?after=-1' : ''}`,
          headers: { ...viewer, 'last-event-id': i % 2 ? '' : (['abc', '-5', '1e400', SQLISH[0] as string][i % 4] as string) },
        });
        break;
      case 10: // unknown methods
        out.push({ kind: 'bad-method', method: ['PUT', 'DELETE', 'PATCH'][i % 3] as string, path: `/api/tasks/${id}`, headers: op, body: '{}' });
        break;
      case 11: // bad idempotency keys
        out.push({
          kind: 'bad-header',
          method: 'POST',
          path: `/api/tasks/${id}/pause`,
          headers: { ...op, 'idempotency-key': ['x'.repeat(300), 'with space', 'ünïcode'][i % 3] as string },
          body: '{}',
        });
        break;
      case 12: // unknown ids that look real
        out.push({
          kind: 'unknown-id',
          method: i % 2 ? 'GET' : 'POST',
          path: `/api/tasks/0000000000${String(i).padStart(16, '0')}${i % 2 ? '' : '/resume'}`,
          headers: op,
          body: i % 2 ? undefined : '{}',
        });
        break;
      default: // prototype-pollution shapes and deep nesting
        out.push({
          kind: 'hostile-json',
          method: 'POST',
          path: i % 2 ? '/api/tasks/batch' : `/api/tasks/${id}/cancel`,
          headers: op,
          body: i % 2 ? `{"tasks":${'['.repeat(5000)}${']'.repeat(5000)}}` : '{"__proto__":{"polluted":1},"constructor":{"prototype":{"x":1}}}',
        });
    }
  }
  return out;
}

describe('abuse', () => {
  it('answers 10,000 malformed and hostile requests with 4xx errors, stays up, and changes no task', { timeout: 600_000 }, async () => {
    const db = `sqlite:${join(tempDir(), 'abuse.db')}`;
    // Tasks to aim at: one pending, one waiting for a signal, one finished (no worker runs during the abuse).
    const engine = new Engine({ store: db });
    await engine.ready();
    const { quick, review } = await import('./fixtures/server-workflows.ts');
    engine.register(quick).register(review);
    const w = engine.worker({ pollIntervalMs: 20 });
    await w.start();
    const done = await engine.start(quick, { n: 2 });
    await done.result();
    const waiting = await engine.start(review, { title: 'x' });
    await eventually(async () => (await engine.get(waiting.id)).status === 'waiting', 20_000, 'the review to wait');
    await w.stop();
    const pending = await engine.start(quick, { n: 3 });
    const ids = [done.id, waiting.id, pending.id];
    const before = await Promise.all(ids.map((id) => engine.get(id)));
    const countBefore = (await engine.list({ limit: 1000 })).tasks.length;

    const env = { STEPWISE_TOKENS: TOKENS.map((t) => `${t.name}:${t.role}:${t.token}`).join(',') };
    const server = spawnCli(['serve', 'test/fixtures/server-workflows.ts', '--db', db, '--port', '0'], env);
    let url = '';
    await eventually(
      () => {
        const m = /"msg":"listening","url":"([^"]+)"/.exec(server.output());
        if (m) url = m[1] as string;
        return url !== '';
      },
      60_000,
      `the server to listen: ${server.output()}`,
    );

    const all = probes(ids, 10_000);
    const byKind = new Map<string, Map<number, number>>();
    const bad: string[] = [];
    let next = 0;
    const run = async (): Promise<void> => {
      while (next < all.length) {
        const p = all[next++] as Probe;
        let status: number;
        let body = '';
        try {
          const ac = new AbortController();
          const res = await fetch(`${url}${p.path}`, { method: p.method, headers: p.headers ?? {}, ...(p.body !== undefined ? { body: p.body } : {}), signal: ac.signal });
          status = res.status;
          if (res.headers.get('content-type')?.includes('text/event-stream')) ac.abort();
          else body = await res.text();
        } catch (e) {
          status = -1;
          body = String(e);
        }
        const kinds = byKind.get(p.kind) ?? new Map<number, number>();
        kinds.set(status, (kinds.get(status) ?? 0) + 1);
        byKind.set(p.kind, kinds);
        const jsonError = status === 404 && p.path.startsWith('/API') ? true : /"error":\{"code":"[A-Z_]+","message":/.test(body);
        if (status < 400 || status >= 500 || !jsonError) {
          if (bad.length < 20) bad.push(`${p.kind} ${p.method} ${p.path.slice(0, 80)} → ${status} ${body.slice(0, 200)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 16 }, run));
    const summary = [...byKind].map(([kind, statuses]) => `${kind}: ${[...statuses].map(([s, c]) => `${s}×${c}`).join(' ')}`).join('\n');
    console.log(`abuse: ${all.length} requests\n${summary}`);
    expect(bad, summary).toEqual([]);
    expect(all.length).toBeGreaterThanOrEqual(10_000);

    // Still up and serving.
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    expect(server.child.exitCode).toBeNull();
    // No task changed, none was created.
    const after = await Promise.all(ids.map((id) => engine.get(id)));
    expect(after).toEqual(before);
    expect((await engine.list({ limit: 1000 })).tasks.length).toBe(countBefore);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
    // No token in the logs.
    for (const t of TOKENS) expect(server.output()).not.toContain(t.token);
    await engine.close();
  });
});
