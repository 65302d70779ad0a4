// engine.drift(id | filter) finds the recorded model calls the current code would make with another
// request by replaying each task (no model call, nothing written to the task), and
// `fromStep: 'first-drift'` re-runs (retry) or forks a task from the first of them: the calls
// before it keep their recorded answers, the drifted one and the rest are made anew.
import { describe, expect, it } from 'vitest';
import { MockLanguageModelV3 } from 'ai/test';
import { engineOf, workflow, type Workflow } from '../src/index.ts';
import { generateText } from '../src/ai/index.ts';
import { fakeModel as baseModel } from './support/fake-model.ts';
import { TEST_STORE, makeEngine, startWorker, tempDbUrl } from './support/engine.ts';

/** A model answering `<id> answer <n>`. */
const fakeModel = (id: string): ReturnType<typeof baseModel> => baseModel(id, `${id} `);

/** An outline then a draft, each a model call; `draftPrompt` is what a prompt fix edits. */
function article(model: MockLanguageModelV3, draftPrompt: string, extraStep = false): Workflow<{ topic: string }, { outline: string; draft: string }> {
  return workflow('article', async (ctx, input: { topic: string }) => {
    const outline = await generateText(ctx, 'outline', { model, prompt: `Outline: ${input.topic}` });
    const draft = await generateText(ctx, 'draft', { model, prompt: `${draftPrompt}: ${outline.text}` });
    if (extraStep) await ctx.step('notify', () => 'sent');
    return { outline: outline.text, draft: draft.text };
  });
}

/** Runs `article` tasks of `topics` to their end with `code`, on a new database; returns their ids, oldest first. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function recorded(url: string, code: Workflow<any, any, any>, topics: string[], tags?: Record<string, string>): Promise<string[]> {
  const engine = makeEngine({ store: url, workflows: [code] });
  const worker = await startWorker(engine);
  const ids: string[] = [];
  try {
    for (const topic of topics) {
      const { id } = await engine.start('article', { topic }, tags ? { tags } : {});
      await engine.result(id, { timeout: '10s' });
      ids.push(id);
    }
  } finally {
    await worker.stop();
  }
  return ids;
}

describe(`engine.drift and fromStep 'first-drift' (${TEST_STORE})`, () => {
  it('names the first drifted call of a task, and a retry from it keeps the calls before it', async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const [id] = (await recorded(url, article(fake.model, 'Draft'), ['tides'])) as [string];
    expect(fake.prompts).toHaveLength(2);

    const same = makeEngine({ store: url, workflows: [article(fake.model, 'Draft')] });
    expect(await same.drift(id)).toEqual({ taskId: id, workflow: 'article', firstDrift: null, drift: [] });

    // The draft's prompt fixed: only the draft drifted; the replay calls no model.
    const fixed = makeEngine({ store: url, workflows: [article(fake.model, 'Draft in two paragraphs')] });
    const d = await fixed.drift(id);
    expect(d).toMatchObject({ taskId: id, workflow: 'article', firstDrift: 'draft' });
    expect(d.drift).toEqual([{ step: 'draft', model: expect.stringContaining('m1'), recordedFingerprint: expect.any(String), fingerprint: expect.any(String) }]);
    expect(d.drift[0]?.fingerprint).not.toBe(d.drift[0]?.recordedFingerprint);
    expect(fake.prompts).toHaveLength(2);
    // The task is untouched by the replay.
    expect(await fixed.get(id)).toMatchObject({ status: 'succeeded', retries: 0, output: { outline: 'm1 answer 1', draft: 'm1 answer 2' } });

    const worker = await startWorker(fixed);
    try {
      const summary = await fixed.retry(id, { fromStep: 'first-drift', by: 'ops' });
      expect(summary.status).toBe('pending');
      expect(await fixed.result(id, { timeout: '10s' })).toEqual({ outline: 'm1 answer 1', draft: 'm1 answer 3' });
    } finally {
      await worker.stop();
    }
    // Only the draft was asked again, with the new prompt; the outline kept its recorded answer.
    expect(fake.prompts).toHaveLength(3);
    expect(fake.prompts[2]).toContain('Draft in two paragraphs: m1 answer 1');
    const retried = await fixed.get(id);
    expect(retried.retries).toBe(1);
    const entry = retried.history.find((h) => h.type === 'transition' && h.event === 'retry');
    expect(entry).toMatchObject({ actor: { kind: 'user', id: 'ops' }, detail: { fromStep: 'draft', rerun: 'succeeded', forgotten: ['draft'] } });
    expect((await fixed.drift(id)).firstDrift).toBeNull();
  });

  it('forks a task from its first drifted call: the source is untouched, the fork records the new answer', async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const [id] = (await recorded(url, article(fake.model, 'Draft'), ['moons'])) as [string];
    const fixed = makeEngine({ store: url, workflows: [article(fake.model, 'Draft, formally')] });
    const worker = await startWorker(fixed);
    try {
      const fork = await fixed.fork(id, { fromStep: 'first-drift', tags: { experiment: 'formal' } });
      expect(await fixed.result(fork.id, { timeout: '10s' })).toEqual({ outline: 'm1 answer 1', draft: 'm1 answer 3' });
      const got = await fixed.get(fork.id);
      expect(got.forkedFrom).toBe(id);
      expect(got.history.find((h) => h.type === 'transition' && h.event === 'create')).toMatchObject({ detail: { forkedFrom: id, fromStep: 'draft', copied: ['outline'] } });
    } finally {
      await worker.stop();
    }
    expect(await fixed.get(id)).toMatchObject({ status: 'succeeded', retries: 0, output: { outline: 'm1 answer 1', draft: 'm1 answer 2' } });
    expect(fake.prompts).toHaveLength(3);
  });

  it('finds the drifted tasks of a filter a page at a time, and names the tasks it cannot replay', async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const ids = await recorded(url, article(fake.model, 'Draft'), ['a', 'b', 'c'], { batch: 'x' });
    const other = workflow('other', async (ctx) => ctx.step('s', () => 1));
    const oldEngine = makeEngine({ store: url, workflows: [other] });
    const w = await startWorker(oldEngine);
    const otherId = (await oldEngine.start(other, undefined, { tags: { batch: 'x' } })).id;
    await oldEngine.result(otherId, { timeout: '10s' });
    await w.stop();

    const fixed = makeEngine({ store: url, workflows: [article(fake.model, 'Draft better')] });
    const first = await fixed.drift({ tags: { batch: 'x' }, limit: 2 });
    // Newest first: the task of a workflow this engine does not run, then c.
    expect(first.checked).toBe(2);
    expect(first.unreplayable).toEqual([{ taskId: otherId, workflow: 'other', reason: expect.stringContaining('not registered with this engine') }]);
    expect(first.drifted.map((d) => [d.taskId, d.firstDrift])).toEqual([[ids[2], 'draft']]);
    expect(first.nextCursor).not.toBeNull();
    const rest = await fixed.drift({ tags: { batch: 'x' }, limit: 10, cursor: first.nextCursor as string });
    expect(rest.checked).toBe(2);
    expect(rest.drifted.map((d) => d.taskId)).toEqual([ids[1], ids[0]]);
    expect(rest.nextCursor).toBeNull();
    expect(fake.prompts).toHaveLength(6);

    // Code that no longer replays a task (a step added after the recorded end) is named, not counted as drift.
    const grown = makeEngine({ store: url, workflows: [article(fake.model, 'Draft', true)] });
    const report = await grown.drift({ workflow: 'article' });
    expect(report.drifted).toEqual([]);
    expect(report.unreplayable.map((u) => u.taskId)).toEqual([ids[2], ids[1], ids[0]]);
    expect(report.unreplayable[0]?.reason).toContain('went on past its journal: step "notify"');
    await expect(grown.drift(ids[0] as string)).rejects.toMatchObject({ code: 'REPLAY_CHECK_FAILED', reason: 'new-call', taskId: ids[0] });
  });

  it("a bulk retry from 'first-drift' re-runs each drifted task from its own first drift and skips the others, also when counting", async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const old = await recorded(url, article(fake.model, 'Draft'), ['a', 'b'], { batch: 'y' });
    const [current] = (await recorded(url, article(fake.model, 'Draft v2'), ['c'], { batch: 'y' })) as [string];
    const engine = makeEngine({ store: url, workflows: [article(fake.model, 'Draft v2')] });
    const filter = { tags: { batch: 'y' } };
    const dry = await engine.bulk({ action: 'retry', filter, fromStep: 'first-drift', dryRun: true });
    expect(dry).toMatchObject({ matched: 3, acted: 2, skippedCount: 1, skipped: [{ id: current, status: 'succeeded', reason: 'no drifted model call' }], failedCount: 0 });
    expect(fake.prompts).toHaveLength(6);
    const worker = await startWorker(engine);
    try {
      const done = await engine.bulk({ action: 'retry', filter, fromStep: 'first-drift', by: 'ops' });
      expect(done).toMatchObject({ matched: 3, acted: 2, skippedCount: 1, failedCount: 0 });
      for (const id of old) expect(((await engine.result(id, { timeout: '10s' })) as { draft: string }).draft).toMatch(/^m1 answer [78]$/);
    } finally {
      await worker.stop();
    }
    expect(fake.prompts).toHaveLength(8);
    expect(fake.prompts.slice(6).every((p) => p.includes('Draft v2: m1 answer'))).toBe(true);
    expect((await engine.get(current)).retries).toBe(0);
  });

  it('never lets replayed code act on the real database through engineOf(ctx)', async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const side = workflow('side-effect', async () => 1);
    // Holds the engine at the top (fine), and starts a task outside a step (a mistake a replay must not repeat).
    const careless = (prompt: string): Workflow<{ topic: string }, string> =>
      workflow('careless', async (ctx, input: { topic: string }) => {
        const engine = engineOf(ctx);
        const r = await generateText(ctx, 'write', { model: fake.model, prompt: `${prompt}: ${input.topic}` });
        if (input.topic === 'outside') await engine.start(side);
        await ctx.step('notify', () => engine.list({ limit: 1 }).then(() => 'ok'));
        return r.text;
      });
    const engine = makeEngine({ store: url, workflows: [careless('Write'), side] });
    const worker = await startWorker(engine);
    const ids: string[] = [];
    try {
      for (const topic of ['inside', 'outside']) {
        const { id } = await engine.start('careless', { topic });
        await engine.result(id, { timeout: '10s' });
        ids.push(id);
      }
    } finally {
      await worker.stop();
    }
    const sides = async (): Promise<number> => (await engine.list({ workflow: 'side-effect' })).tasks.length;
    expect(await sides()).toBe(1);
    const edited = makeEngine({ store: url, workflows: [careless('Write well'), side] });
    // The engine held at the top replays; the drift is found.
    expect((await edited.drift(ids[0] as string)).firstDrift).toBe('write');
    // The start outside a step is refused in the replay: reported, and no second side task.
    await expect(edited.drift(ids[1] as string)).rejects.toMatchObject({ code: 'REPLAY_CHECK_FAILED', message: expect.stringContaining('runs no command') });
    expect(await sides()).toBe(1);
    expect(fake.prompts).toHaveLength(2);
  });

  it('refuses what it cannot do with a typed error, and leaves the task as it was', async () => {
    const fake = fakeModel('m1');
    const url = tempDbUrl();
    const [id] = (await recorded(url, article(fake.model, 'Draft'), ['x'])) as [string];
    const engine = makeEngine({ store: url, workflows: [article(fake.model, 'Draft')] });
    // No drift: nothing to re-run from.
    await expect(engine.retry(id, { fromStep: 'first-drift' })).rejects.toMatchObject({ code: 'CONFLICT', message: expect.stringContaining('no drifted model call') });
    await expect(engine.fork(id, { fromStep: 'first-drift' })).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(await engine.get(id)).toMatchObject({ status: 'succeeded', retries: 0, output: { outline: 'm1 answer 1', draft: 'm1 answer 2' } });
    expect((await engine.list({ workflow: 'article' })).tasks).toHaveLength(1);

    await expect(engine.drift('no-such-task')).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(engine.drift('')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(engine.drift({ workflow: 'article', statuss: 'failed' } as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('statuss') });
    await expect(engine.drift({ limit: 0 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('limit') });
    await expect(engine.drift(42 as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    // An engine without the workflow's code cannot replay it.
    const bare = makeEngine({ store: url });
    await expect(bare.drift(id)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('not registered with this engine') });
    await expect(bare.retry(id, { fromStep: 'first-drift' })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(fake.prompts).toHaveLength(2);
  });
});
