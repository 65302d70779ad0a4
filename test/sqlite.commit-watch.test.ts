// Wake-ups across processes on SQLite (sqlite/commit-watch.ts): an engine hears that another
// connection committed to its file (PRAGMA data_version) and acts at once, instead of at its next
// poll. Two engines on one file stand for two processes (each has its own connection); the
// worker's poll is a minute, so only the watch can make it run the task within the test.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, workflow } from '../src/index.ts';
import { SqliteStore } from '../src/sqlite/store.ts';
import type { WakeEvent } from '../src/store.ts';
import { eventually, tempDir } from './support/engine.ts';

const hello = workflow('watch-hello', async (ctx, input: { name: string }) => ctx.step('greet', () => `hello ${input.name}`));
const waiter = workflow('watch-waiter', async (ctx) => {
  const e = await ctx.waitForEvent<string>('go', { timeout: '10m' });
  return e.timedOut ? null : e.payload;
});

describe('SQLite: commits of another process wake this one', () => {
  it('a worker polling once a minute runs a task another engine starts, and that engine hears the result', async () => {
    const url = `sqlite:${join(tempDir(), 'watch.db')}`;
    const workerSide = new Engine({ store: url, workflows: [hello, waiter] });
    const client = new Engine({ store: url, workflows: [hello, waiter] });
    try {
      await workerSide.worker({ pollIntervalMs: 60_000 }).start();
      const { id } = await client.start(hello, { name: 'there' });
      expect(await client.result(id, { timeout: '10s' })).toBe('hello there');
      // A signal to a parked task from the other engine wakes it too.
      const parked = await client.start(waiter);
      await eventually(async () => (await client.get(parked.id)).status === 'waiting', 10_000, 'the task to park');
      await client.signal(parked.id, 'go', 'now');
      expect(await client.result(parked.id, { timeout: '10s' })).toBe('now');
    } finally {
      await client.close();
      await workerSide.close();
    }
  });

  it('tells subscribers of both topics once another connection committed, and nothing for its own commits', async () => {
    const path = join(tempDir(), 'watch.db');
    const mine = new SqliteStore(path);
    const other = new SqliteStore(path);
    await mine.migrate();
    await other.migrate();
    const heard: WakeEvent[] = [];
    const offWork = await mine.subscribe((e) => heard.push(e), 'work');
    const offSettled = await mine.subscribe((e) => heard.push(e), 'settled');
    try {
      await mine.registerWorkflows([{ name: 'mine', version: '1', at: 1 }]);
      await new Promise((r) => setTimeout(r, 60));
      expect(heard).toEqual([]);
      await other.registerWorkflows([{ name: 'theirs', version: '1', at: 1 }]);
      await eventually(() => heard.length === 2, 5000, 'both subscribers to hear the commit');
      expect(heard).toEqual([
        { reason: 'task', taskId: '*' },
        { reason: 'settled', taskId: '*' },
      ]);
    } finally {
      await offWork?.();
      await offSettled?.();
      await mine.close();
      await other.close();
    }
  });
});
