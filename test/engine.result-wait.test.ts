// result() hears the end of its task even when the news arrives while it is reading the task: the
// read in flight returns a row from before the end, and the call must not then wait for its next
// poll. Observed with the poll timer frozen (fake setTimeout), so that only the news can wake it.
// The task is started by another engine, so that the waiting engine reads it first.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Engine, openStore, workflow } from '../src/index.ts';
import type { TaskRow } from '../src/store.ts';
import { FAST, eventually, gate, tempDbUrl } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

const quick = workflow('quick', async (ctx) => ctx.step('one', () => 42));

afterEach(() => {
  vi.useRealTimers();
});

describe('result() and the news of its task', () => {
  it('news of the end that arrives while result() reads the task wakes it, without waiting for a poll', async () => {
    const url = tempDbUrl();
    const inner = await openStore(url);
    const readTaken = gate<TaskRow>();
    const release = gate();
    let held = false;
    const hold = async (row: TaskRow): Promise<void> => {
      // The first read of result(): taken before the task ran, answered after it has ended.
      held = true;
      readTaken.open(row);
      await release.promise;
    };
    const store = spyStore(inner, {
      getTask: (original) => async (id) => {
        const row = await original(id);
        if (!held && row?.workflow === 'quick') await hold(row);
        return row;
      },
      getTasks: (original) => async (ids) => {
        const rows = await original(ids);
        const row = rows.find((r) => r.workflow === 'quick');
        if (!held && row) await hold(row);
        return rows;
      },
    });
    const starter = new Engine({ store: url, workflows: [quick] });
    const engine = new Engine({ store, workflows: [quick] });
    try {
      const { id } = await starter.start(quick);
      let outcome: { value: unknown } | null = null;
      const result = engine.result<number>(id, { timeout: '60s' }).then((value) => (outcome = { value }));
      const stale = await readTaken.promise;
      expect(stale.status).toBe('pending');

      const worker = engine.worker(FAST);
      await worker.start();
      await eventually(async () => (await inner.getTask(id))?.status === 'succeeded', 20_000, 'the task to succeed');
      await worker.stop(); // its end, and the news of it in this process, are behind us

      // From here no timer fires: a call that missed the news would wait for ever.
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      release.open();
      for (let turn = 0; turn < 1000 && !outcome; turn++) await new Promise((r) => setImmediate(r));
      expect(outcome).toEqual({ value: 42 });
      vi.useRealTimers();
      await result;
    } finally {
      vi.useRealTimers();
      await engine.close();
      await starter.close();
    }
  });
});
