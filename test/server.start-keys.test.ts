// The HTTP API takes title, debounce and singleton in a start body (checked with coded errors),
// answers with titles in task lists and reads, and the dashboard shows titles in its task list and
// on the task page.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const article = workflow('article', async (_ctx, input: { topic: string }) => input.topic, { title: (input) => `Article: ${input.topic}` });

function setup() {
  const engine = makeEngine({ workflows: [article] });
  const server = createServer(engine, { tokens: TOKENS, bodyLimitBytes: 64 * 1024 });
  return { engine, server };
}

describe('HTTP API and dashboard: titles, debounce and singleton', () => {
  it('starts with a title or the workflow title, and lists, reads and shows it on the dashboard', async () => {
    const { server } = setup();
    const a = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'Tides' } } });
    const b = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'Moons' }, title: 'Moons <draft 2>' } });
    expect([a.status, b.status]).toEqual([201, 201]);
    const list = await call(server, 'GET', '/api/tasks', { as: 'vera' });
    expect(list.body.tasks.map((t: { title: string }) => t.title)).toEqual(['Moons <draft 2>', 'Article: Tides']);
    expect((await call(server, 'GET', `/api/tasks/${a.body.id}`, { as: 'vera' })).body.title).toBe('Article: Tides');
    const page = (await call(server, 'GET', '/', { as: 'vera' })).body as string;
    expect(page).toContain('<th>Title</th>');
    expect(page).toContain('<td class="title">Article: Tides</td>');
    // Escaped like every value from a task.
    expect(page).toContain('Moons &lt;draft 2&gt;');
    const taskPage = (await call(server, 'GET', `/tasks/${b.body.id}`, { as: 'vera' })).body as string;
    expect(taskPage).toContain('<dt>Title</dt><dd class="title">Moons &lt;draft 2&gt;</dd>');
    // A priority in the body reaches the task; one outside 0..1000 is refused.
    const urgent = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'Now' }, priority: 9 } });
    expect((await call(server, 'GET', `/api/tasks/${urgent.body.id}`, { as: 'vera' })).body.priority).toBe(9);
    expect((await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'x' }, priority: 1001 } })).status).toBe(400);
    const bad = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'x' }, title: 'x'.repeat(201) } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('title option must be 1-200 characters') });
  });

  it('collapses debounced starts into one task (201, then 200 with the same id) and shows its key on the task page', async () => {
    const { engine, server } = setup();
    const body = (topic: string) => ({ workflow: 'article', input: { topic }, debounce: { key: 'feed-1', period: '1h', maxWait: 7_200_000 } });
    const first = await call(server, 'POST', '/api/tasks', { body: body('a') });
    const second = await call(server, 'POST', '/api/tasks', { body: body('b') });
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body).toMatchObject({ id: first.body.id, created: false });
    expect((await engine.get(first.body.id)).input).toEqual({ topic: 'b' });
    expect((await call(server, 'GET', `/tasks/${first.body.id}`, { as: 'vera' })).body).toContain('<dt>Debounce key</dt><dd>feed-1</dd>');
    const bad = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'x' }, debounce: { key: 'k', period: '1h', maxWait: '1m' } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('debounce.maxWait') });
  });

  it('refuses a second singleton start with 409 SINGLETON_RUNNING naming the live task, or joins it (200)', async () => {
    const { server } = setup();
    const first = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'a' }, singleton: 'desk' } });
    expect(first.status).toBe(201);
    const refused = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'b' }, singleton: 'desk' } });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'SINGLETON_RUNNING', message: expect.stringContaining(first.body.id) });
    const joined = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'b' }, singleton: { key: 'desk', mode: 'join' } } });
    expect(joined.status).toBe(200);
    expect(joined.body).toMatchObject({ id: first.body.id, created: false });
    const bad = await call(server, 'POST', '/api/tasks', { body: { workflow: 'article', input: { topic: 'b' }, singleton: { key: 'desk', mode: 'queue' } } });
    expect(bad.status).toBe(400);
  });
});
