// `explain` on a task whose wait is over (an approval decided) says so and who may resume it,
// instead of repeating what the task waited for ("decide with stepwise approve" for an approval
// already approved); and when no live worker serves the task's version, it says so. Workers record
// the versions they serve when they start, refresh them while they run and remove them when they
// stop; a worker not seen for three refreshes (it died) no longer counts.
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow } from '../src/index.ts';
import { eventually, tempDbUrl } from './support/engine.ts';

describe('explain on a task whose wait is over', () => {
  it('an approval already approved, with its worker gone: says the wait is over and which version must resume it, not "decide"', async () => {
    const url = tempDbUrl();
    const v1 = workflow('review-doc', async (ctx) => ctx.approval('review', { approvers: ['alice'] }), { version: 1 });
    const v2 = workflow('review-doc', async (ctx) => ctx.approval('review', { approvers: ['alice'] }), { version: 2 });
    const old = new Engine({ store: url, workflows: [v1] });
    const current = new Engine({ store: url, workflows: [v2] });
    try {
      const w1 = old.worker({ pollIntervalMs: 20 });
      await w1.start();
      const { id } = await old.start(v1);
      await eventually(async () => (await old.get(id)).status === 'waiting', 20_000, 'the task to wait for its approval');
      await w1.stop();
      const w2 = current.worker({ pollIntervalMs: 20 });
      await w2.start();
      expect((await current.explain(id)).summary).toMatch(/^Waiting for approval "review"/);
      const [approval] = (await current.get(id)).approvals;
      await current.decide(approval!.id, { approve: true, by: 'alice' });
      const summary = (await current.explain(id)).summary;
      expect(summary).not.toMatch(/decide with/);
      expect(summary).toMatch(
        /^Waiting no more: its wait ended at .+, but it was started under version 1 of "review-doc" and live workers serve only version\(s\) 2: run a worker with version 1, or list it in compatibleVersions/,
      );
      expect((await current.get(id)).status).toBe('waiting');
      await w2.stop();
    } finally {
      await old.close();
      await current.close();
    }
  });
});

describe('explain on a parked task whose sleep has ended', () => {
  it('asked from an engine that does not know the workflow: says the wait is over and who resumes it', async () => {
    const url = tempDbUrl();
    // Long enough that the run parks before the sleep ends, however busy the machine.
    const wf = workflow('nap', async (ctx) => ctx.sleep('nap', '3s'));
    const engine = new Engine({ store: url, workflows: [wf] });
    const elsewhere = new Engine({ store: url, workflows: [] });
    try {
      const w = engine.worker({ pollIntervalMs: 60_000, parkAfterMs: 1 });
      await w.start();
      const { id } = await engine.start(wf);
      await eventually(async () => (await engine.get(id)).status === 'waiting', 20_000, 'the task to park on its sleep');
      await w.stop();
      await eventually(async () => ((await engine.explain(id)).runAt ?? Infinity) <= Date.now(), 20_000, 'the sleep to end');
      // An engine that knows nothing of "nap": the store says a worker served it once, and none runs now.
      expect((await elsewhere.explain(id)).summary).toMatch(
        // (Pending when the stopping worker had claimed it again and released it.)
        /^(Waiting no more: its wait ended at .+|Pending), but no live worker serves "nap" \(workers registered version\(s\) 1 before, and none of them is running now\): start a worker with version 1\.$/,
      );
      // With a worker of that version running again, the task is simply due (whichever engine asks).
      const again = engine.worker({ pollIntervalMs: 60_000, parkAfterMs: 1 });
      await again.start();
      expect((await elsewhere.explain(id)).summary).toMatch(/^(Waiting no more: its wait ended at [^;]+; the next worker serving "nap" version 1|Pending and due|Running|Succeeded)/);
      await again.stop();
    } finally {
      await engine.close();
      await elsewhere.close();
    }
  });
});

describe('explain and the workers that are live', () => {
  it('a worker that died (not seen for three refreshes) does not serve; one seen now does; one that serves the version as compatible does', async () => {
    const url = tempDbUrl();
    const v1 = workflow('draft', async (ctx) => ctx.step('write', async () => 'text'), { version: 1 });
    const v2 = workflow('draft', async (ctx) => ctx.step('write', async () => 'text'), { version: 2, compatibleVersions: [1] });
    const engine = new Engine({ store: url, workflows: [v1] });
    const next = new Engine({ store: url, workflows: [v2] });
    const store = await openStore(url);
    try {
      const { id } = await engine.start(v1);
      // A worker of version 1 last seen 100 s ago: its process died without removing itself.
      const died = Date.now() - 100_000;
      await store.registerWorkflows([{ name: 'draft', version: '1', at: died }]);
      await store.recordPresence({ workerId: 'w-dead', served: [{ name: 'draft', version: '1' }], at: died }, 0);
      expect((await engine.explain(id)).summary).toMatch(/^Pending, but no live worker serves "draft" \(workers registered version\(s\) 1 before/);
      // Seen just now, it counts; removed (a clean stop), it no longer does.
      await store.recordPresence({ workerId: 'w-dead', served: [{ name: 'draft', version: '1' }], at: Date.now() }, 0);
      expect((await engine.explain(id)).summary).toMatch(/^Pending and due: the next worker serving "draft"/);
      await store.removePresence('w-dead');
      expect((await engine.explain(id)).summary).toMatch(/^Pending, but no live worker serves "draft"/);
      // A running v2 worker that lists 1 in compatibleVersions serves the v1 task (and runs it).
      const w = next.worker({ pollIntervalMs: 20 });
      await w.start();
      expect(await store.servedVersions('draft', Date.now() - 60_000)).toEqual(['1', '2']);
      expect((await next.explain(id)).summary).not.toMatch(/no live worker|serve only/);
      expect(await next.result(id, { timeout: '20s' })).toBe('text');
      await w.stop();
      expect(await store.servedVersions('draft', 0)).toEqual([]);
    } finally {
      await store.close();
      await engine.close();
      await next.close();
    }
  });
});
