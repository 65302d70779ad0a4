// News across processes: an engine that follows a task's log hears what a worker of another
// process commits at once, not at its next poll (SQLite: the commit watch; PostgreSQL: the log
// watch, as its notifications do not carry each entry). Two engines on one store stand for two
// processes; the reader's poll is a minute long, so only that news can end the test in time.
import { describe, expect, it } from 'vitest';
import { Engine, workflow, type TaskEvent } from '../src/index.ts';
import { FAST, TEST_STORE, gate, tempDbUrl } from './support/engine.ts';

let release = gate<string>();
const slow = workflow('news-slow', async (ctx) => {
  const a = await ctx.step('first', () => 'one');
  const b = await ctx.step('second', () => release.promise);
  return `${a} ${b}`;
});

describe('news across processes', () => {
  it(`hears a worker of another process's entries within the test, with the reader's poll a minute long (${TEST_STORE})`, async () => {
    const url = tempDbUrl();
    const workerSide = new Engine({ store: url, workflows: [slow] });
    const reader = new Engine({ store: url, workflows: [slow] });
    release = gate<string>();
    try {
      // The worker polls as usual (its own LISTEN may not be live yet when the task is started); the reader does not.
      await workerSide.worker(FAST).start();
      const { id } = await reader.start(slow);
      const seen: string[] = [];
      const follow = (async () => {
        for await (const e of reader.events({ taskId: id, follow: true, pollMs: 60_000 }) as AsyncIterable<TaskEvent>) {
          if (e.type === 'step:completed') seen.push(e.step.name);
          if (e.type === 'transition' && e.event === 'complete') return;
        }
      })();
      const deadline = Date.now() + 15_000;
      while (!seen.includes('first') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(seen).toEqual(['first']);
      release.open('two');
      await Promise.race([follow, new Promise((_, reject) => setTimeout(() => reject(new Error('the end of the task was not heard within 15 s')), 15_000))]);
      expect(seen).toEqual(['first', 'second']);
    } finally {
      await reader.close();
      await workerSide.close();
    }
  });
});
