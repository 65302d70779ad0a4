// The log watch (src/log-watch.ts) tells a follower of a task when the task's log or stream moved
// in another process. Its store here answers `logPositions` from a table the test moves, so each
// look's answer is chosen: the behaviour under test is what the watch concludes from them.
import { describe, expect, it } from 'vitest';
import { followLog, LOG_WATCH_MS } from '../src/log-watch.ts';
import { NewsBus } from '../src/news.ts';
import type { LogPosition, Store } from '../src/store.ts';

function positions(): { store: Store; at: Map<string, LogPosition>; looks: () => number } {
  const at = new Map<string, LogPosition>();
  let looks = 0;
  const store = {
    logPositions: async (ids: readonly string[]) => {
      looks++;
      return ids.flatMap((id) => (at.has(id) ? [at.get(id)!] : []));
    },
  } as unknown as Store;
  return { store, at, looks: () => looks };
}

async function lookedAgain(looks: () => number, times = 2): Promise<void> {
  const from = looks();
  const deadline = Date.now() + 10_000;
  while (looks() < from + times && Date.now() < deadline) await new Promise((r) => setTimeout(r, LOG_WATCH_MS));
  expect(looks()).toBeGreaterThanOrEqual(from + times);
}

describe('log watch', () => {
  it("tells a new follower at the task's first look, as an entry may have come after the follower's first read", async () => {
    const { store, at, looks } = positions();
    const bus = new NewsBus();
    const heard: string[] = [];
    bus.on('log:moved', (n) => heard.push(n.taskId));
    const unfollow = followLog(store, bus, 't1');
    try {
      // The follower read the log at seq 1; a worker elsewhere committed seq 2 before the watch's first look.
      at.set('t1', { taskId: 't1', seq: 2, frame: 0 });
      await lookedAgain(looks);
      expect(heard).toEqual(['t1']);
      // Nothing moved since: no news however many looks.
      await lookedAgain(looks, 3);
      expect(heard).toEqual(['t1']);
      // A frame of its stream, then an entry: one news each.
      at.set('t1', { taskId: 't1', seq: 2, frame: 7 });
      await lookedAgain(looks);
      at.set('t1', { taskId: 't1', seq: 3, frame: 7 });
      await lookedAgain(looks);
      expect(heard).toEqual(['t1', 't1', 't1']);
    } finally {
      unfollow();
    }
  });

  it('stops looking when its last follower stops, and reads each followed task in one look', async () => {
    const { store, at, looks } = positions();
    const bus = new NewsBus();
    const heard: string[] = [];
    bus.on('log:moved', (n) => heard.push(n.taskId));
    at.set('a', { taskId: 'a', seq: 1, frame: 0 });
    at.set('b', { taskId: 'b', seq: 1, frame: 0 });
    const stopA = followLog(store, bus, 'a');
    const stopA2 = followLog(store, bus, 'a');
    const stopB = followLog(store, bus, 'b');
    await lookedAgain(looks);
    expect(heard.sort()).toEqual(['a', 'b']);
    stopA();
    at.set('a', { taskId: 'a', seq: 2, frame: 0 });
    await lookedAgain(looks);
    expect(heard.filter((t) => t === 'a')).toHaveLength(2); // 'a' still has a follower
    stopA2();
    stopB();
    const after = looks();
    await new Promise((r) => setTimeout(r, LOG_WATCH_MS * 10));
    expect(looks()).toBe(after);
  });
});
