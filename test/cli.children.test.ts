// `stepwise show` draws a task's tree of child tasks; `stepwise ls --parent` lists its children
// (the CLI run as a real process against a SQLite file the test's engine wrote).
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
import { FAST, tempDir } from './support/engine.ts';
import { runCli } from './support/processes.ts';

const leaf = workflow('tree-leaf', async (_ctx, input: { n: number }) => input.n);
const middle = workflow('tree-middle', async (ctx, input: { n: number }) => ctx.child(leaf, { n: input.n }));
const root = workflow('tree-root', async (ctx) => (await ctx.children(middle, [{ n: 1 }, { n: 2 }])).length);

describe('stepwise CLI and child tasks', () => {
  it('show draws the tree below a task and names its parent; ls --parent lists its children', async () => {
    const db = `sqlite:${join(tempDir(), 'tree.db')}`;
    const engine = new Engine({ store: db, workflows: [root, middle, leaf] });
    let rootId: string;
    let middles: string[];
    let leaves: string[];
    try {
      const worker = engine.worker(FAST);
      await worker.start();
      rootId = (await engine.start(root)).id;
      expect(await engine.result(rootId)).toBe(2);
      await worker.stop();
      middles = (await engine.get(rootId)).children.map((c) => c.id);
      leaves = await Promise.all(middles.map(async (m) => (await engine.get(m)).children[0]?.id as string));
    } finally {
      await engine.close();
    }
    const show = runCli(['show', rootId, '--db', db]);
    expect(show.code, show.err).toBe(0);
    const tree = show.out.slice(show.out.indexOf('Tree'));
    expect(tree).toMatch(new RegExp(`├─ ${middles[0]}\\s+tree-middle\\s+succeeded`));
    expect(tree).toMatch(new RegExp(`│  └─ ${leaves[0]}\\s+tree-leaf\\s+succeeded`));
    expect(tree).toMatch(new RegExp(`└─ ${middles[1]}\\s+tree-middle\\s+succeeded`));
    expect(tree).toMatch(new RegExp(` {3}└─ ${leaves[1]}\\s+tree-leaf\\s+succeeded`));
    const child = runCli(['show', leaves[0] as string, '--db', db]);
    expect(child.out).toMatch(new RegExp(`parent ${middles[0]}\\s+tree-middle\\s+succeeded`));
    const ls = JSON.parse(runCli(['ls', '--parent', rootId, '--db', db, '--json']).out) as { tasks: Array<{ id: string }> };
    expect(ls.tasks.map((t) => t.id).sort()).toEqual([...middles].sort());
  });
});
