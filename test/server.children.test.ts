// The HTTP API and child tasks: GET /api/tasks?parent=<id> lists a task's children; a task's page
// (GET /api/tasks/:id) names its parent and children.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';
import { TOKENS, call } from './support/server.ts';

const leaf = workflow('http-leaf', async (_ctx, input: { n: number }) => input.n + 1);
const root = workflow('http-root', async (ctx) => ctx.children(leaf, [{ n: 1 }, { n: 2 }, { n: 3 }]));

describe('HTTP API: child tasks', () => {
  it('lists the children of a task with ?parent= and shows parent and children on a task', async () => {
    const engine = makeEngine({ workflows: [root, leaf] });
    const server = createServer(engine, { tokens: TOKENS });
    await startWorker(engine);
    const { id } = await engine.start(root);
    expect(await engine.result(id)).toEqual([2, 3, 4]);
    const listed = await call(server, 'GET', `/api/tasks?parent=${id}`, { as: 'oscar' });
    expect(listed.status).toBe(200);
    const ids = (listed.body.tasks as Array<{ id: string; workflow: string }>).map((t) => t.id);
    expect(ids).toHaveLength(3);
    const task = await call(server, 'GET', `/api/tasks/${id}`, { as: 'oscar' });
    expect((task.body.children as Array<{ id: string }>).map((c) => c.id).sort()).toEqual([...ids].sort());
    const child = await call(server, 'GET', `/api/tasks/${ids[0]}`, { as: 'oscar' });
    expect(child.body.parent).toEqual({ id, workflow: 'http-root', status: 'succeeded' });
    const bad = await call(server, 'GET', '/api/tasks?parent=', { as: 'oscar' });
    expect(bad.status).toBe(400);
  });

  it("the dashboard's task page links a task's parent and its children, with their statuses", async () => {
    const engine = makeEngine({ workflows: [root, leaf] });
    const server = createServer(engine, { tokens: TOKENS });
    await startWorker(engine);
    const { id } = await engine.start(root);
    await engine.result(id);
    const children = (await engine.get(id)).children;
    const page = (await call(server, 'GET', `/tasks/${id}`, { as: 'oscar' })).body as string;
    expect(page).toContain('<h2>Child tasks</h2>');
    for (const c of children) expect(page).toMatch(new RegExp(`<li data-child="${c.id}"><a href="/tasks/${c.id}">.*http-leaf.*s-succeeded`));
    const childPage = (await call(server, 'GET', `/tasks/${children[0]?.id}`, { as: 'oscar' })).body as string;
    expect(childPage).toMatch(new RegExp(`Parent: <a href="/tasks/${id}">.*http-root`));
    const plain = await engine.start(leaf, { n: 0 });
    await engine.result(plain.id);
    expect((await call(server, 'GET', `/tasks/${plain.id}`, { as: 'oscar' })).body).not.toContain('Child tasks');
  });
});
