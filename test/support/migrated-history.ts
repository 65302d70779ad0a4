// What both stores' upgrade tests check after migration 3 copied a version-2 history into the
// event log (the same seven history rows of tasks old-a and old-b, inserted by each test).
import { expect } from 'vitest';
import type { Store } from '../../src/store.ts';

export async function expectHistoryCopiedToLog(store: Store): Promise<void> {
  const a = await store.getEvents('old-a');
  expect(a.map((e) => [e.seq, e.at, e.type, `${e.actorKind}:${e.actorId}`])).toEqual([
    [1, 1000, 'transition', 'user:anonymous'],
    [2, 1002, 'transition', 'worker:w-1'],
    [3, 1004, 'transition', 'system:lease-expiry'],
    [4, 1006, 'transition', 'user:anonymous'],
  ]);
  expect(a.map((e) => JSON.parse(e.data ?? 'null'))).toEqual([
    { event: 'create', from: null, to: 'pending', epoch: 0, detail: null },
    { event: 'claim', from: 'pending', to: 'running', epoch: 1, detail: null },
    { event: 'abort', from: 'running', to: 'pending', epoch: 1, detail: { reason: 'lease expired', previousOwner: 'w-1' } },
    { event: 'pause', from: 'pending', to: 'paused', epoch: 1, detail: { why: 'ops' } },
  ]);
  expect((await store.getEvents('old-b')).map((e) => e.seq)).toEqual([1, 2, 3]);
  // The cross-task read returns the copied rows in history order, once no transaction that
  // started before the copy committed is still running anywhere on the server (the feed's horizon).
  let page = await store.readLog(null, 100);
  for (const end = Date.now() + 60_000; !page.events.length && Date.now() < end; page = await store.readLog(null, 100)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  expect(page.events.map((e) => `${e.taskId}/${e.seq}`)).toEqual(['old-a/1', 'old-b/1', 'old-a/2', 'old-b/2', 'old-a/3', 'old-b/3', 'old-a/4']);
  // Numbering goes on after the copy: the next entry of old-a is 5.
  await store.insertSignal({ actorKind: 'user', actorId: 'ops', taskId: 'old-a', name: 'x', payload: null, idempotencyKey: null, at: 2000 });
  expect((await store.getEvents('old-a', 4)).map((e) => [e.seq, e.type])).toEqual([[5, 'signal:received']]);
}
