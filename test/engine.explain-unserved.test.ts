// `explain` on a task whose wait is over (an approval decided) says so and who may resume it,
// instead of repeating what the task waited for ("decide with stepwise approve" for an approval
// already approved). Which workers are live is not known yet (workers register their versions only
// at start): a version some worker ever registered counts as served.
import { describe, expect, it } from 'vitest';
import { Engine, workflow } from '../src/index.ts';
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
      await eventually(async () => (await old.get(id)).status === 'waiting', 10_000, 'the task to wait for its approval');
      await w1.stop();
      const w2 = current.worker({ pollIntervalMs: 20 });
      await w2.start();
      expect((await current.explain(id)).summary).toMatch(/^Waiting for approval "review"/);
      const [approval] = (await current.get(id)).approvals;
      await current.decide(approval!.id, { approve: true, by: 'alice' });
      const summary = (await current.explain(id)).summary;
      expect(summary).not.toMatch(/decide with/);
      expect(summary).toMatch(/^Waiting no more: its wait ended at [^;]+; the next worker serving "review-doc" version 1 with a free slot will resume it\.$/);
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
    const wf = workflow('nap', async (ctx) => ctx.sleep('nap', '50ms'));
    const engine = new Engine({ store: url, workflows: [wf] });
    const elsewhere = new Engine({ store: url, workflows: [] });
    try {
      const w = engine.worker({ pollIntervalMs: 60_000, parkAfterMs: 1 });
      await w.start();
      const { id } = await engine.start(wf);
      await eventually(async () => (await engine.get(id)).status === 'waiting', 10_000, 'the task to park on its sleep');
      await w.stop();
      await eventually(async () => ((await engine.explain(id)).runAt ?? Infinity) <= Date.now(), 10_000, 'the sleep to end');
      // An engine that knows nothing of "nap": the store's registry says which version a worker served.
      expect((await elsewhere.explain(id)).summary).toMatch(/^Waiting no more: its wait ended at [^;]+; the next worker serving "nap" version/);
    } finally {
      await engine.close();
      await elsewhere.close();
    }
  });
});
