// Prompt and model fingerprints: each model call of stepwise-engine/ai records a fingerprint of its
// model, prompt or messages, tools and settings. A replay that would send another request (the
// prompt edited, the model swapped) reports the call as drifted (checkReplay's `drift`, the
// worker's `model:drift` event on a real resume) without calling the model; a re-run from the
// first drifted call records the new answer.
import { describe, expect, it } from 'vitest';
import { MockLanguageModelV3 } from 'ai/test';
import { workflow, type Workflow } from '../src/index.ts';
import { generateText } from '../src/ai/index.ts';
import { checkDrift, checkReplay } from '../src/testing/index.ts';
import { fakeModel } from './support/fake-model.ts';
import { TEST_STORE, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

/** A summary then a wait: version 1's prompt is `prompt`, its model `model`. */
function summary(model: MockLanguageModelV3, prompt: string, temperature = 0): Workflow<{ doc: string }, string> {
  return workflow('summary', async (ctx, input: { doc: string }) => {
    const r = await generateText(ctx, 'summarise', { model, prompt: `${prompt}: ${input.doc}`, temperature });
    await ctx.waitForEvent('publish');
    return r.text;
  });
}

describe(`model call fingerprints and drift (${TEST_STORE})`, () => {
  it('reports the recorded calls the current code would make otherwise, and a re-run from the first records a new answer', async () => {
    const fake = fakeModel('mock-1');
    const v1 = summary(fake.model, 'Summarise');
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [v1] });
    const worker = await startWorker(engine);
    let id: string;
    try {
      id = (await engine.start(v1, { doc: 'tides' })).id;
      await waitForStatus(engine, id, 'waiting');
      await engine.signal(id, 'publish', null);
      expect(await engine.result(id, { timeout: '10s' })).toBe('answer 1');
    } finally {
      await worker.stop();
    }
    // The same code: nothing drifted.
    expect((await checkReplay(engine, id)).drift).toEqual([]);
    // The prompt edited, the model swapped, a setting changed: each drifts; the model is not called.
    for (const changed of [summary(fake.model, 'Summarise briefly'), summary(fakeModel('mock-2').model, 'Summarise'), summary(fake.model, 'Summarise', 0.7)]) {
      const report = await checkReplay(engine, id, { workflow: changed });
      expect(report.drift).toEqual([{ step: 'summarise', model: expect.any(String), recordedFingerprint: expect.any(String), fingerprint: expect.any(String) }]);
      expect(report.drift[0]?.fingerprint).not.toBe(report.drift[0]?.recordedFingerprint);
      expect(report.ended).toBe('same-end');
    }
    expect(fake.prompts).toHaveLength(1);

    // Deployed: the new prompt; re-run from the first drifted call.
    const v2 = summary(fake.model, 'Summarise briefly');
    const next = makeEngine({ store: url, workflows: [v2] });
    const drifted = (await checkReplay(next, id)).drift;
    const worker2 = await startWorker(next);
    try {
      await next.retry(id, { fromStep: drifted[0]?.step as string });
      await waitForStatus(next, id, 'waiting');
      await next.signal(id, 'publish', null);
      expect(await next.result(id, { timeout: '10s' })).toBe('answer 2');
      expect(fake.prompts[1]).toContain('Summarise briefly: tides');
    } finally {
      await worker2.stop();
    }
    expect((await checkReplay(next, id)).drift).toEqual([]);
  });

  it('checkDrift finds the drifted tasks of a filter, each with the step to re-run from', async () => {
    const fake = fakeModel('mock-1');
    const url = tempDbUrl();
    const old = makeEngine({ store: url, workflows: [summary(fake.model, 'Summarise')] });
    const worker = await startWorker(old);
    const ids: string[] = [];
    try {
      for (const doc of ['a', 'b']) {
        const { id } = await old.start('summary', { doc }, { tags: { batch: 'x' } });
        await waitForStatus(old, id, 'waiting');
        await old.signal(id, 'publish', null);
        await old.result(id, { timeout: '10s' });
        ids.push(id);
      }
    } finally {
      await worker.stop();
    }
    expect((await checkDrift(old, { tags: { batch: 'x' } })).drifted).toEqual([]);
    const edited = makeEngine({ store: url, workflows: [summary(fake.model, 'Summarise in two lines')] });
    const report = await checkDrift(edited, { tags: { batch: 'x' } });
    expect(report.checked).toBe(2);
    expect(report.drifted.map((d) => [d.taskId, d.firstDrift])).toEqual([
      [ids[1], 'summarise'],
      [ids[0], 'summarise'],
    ]);
    expect(fake.prompts).toHaveLength(2);
  });

  it("tells the worker's listeners when a task resumed by changed code replays a drifted call", async () => {
    const fake = fakeModel('mock-1');
    const url = tempDbUrl();
    const first = makeEngine({ store: url, workflows: [summary(fake.model, 'Summarise')] });
    const w1 = await startWorker(first);
    const { id } = await first.start('summary', { doc: 'moons' });
    await waitForStatus(first, id, 'waiting');
    await w1.stop();
    // The same task resumed by a worker of the edited code (same version: a change made in place).
    const resumed = makeEngine({ store: url, workflows: [summary(fake.model, 'Summarise in French')] });
    const w2 = await startWorker(resumed);
    const drifts: Array<{ taskId: string; step: string }> = [];
    w2.on('model:drift', (e) => void drifts.push({ taskId: e.taskId, step: e.step }));
    try {
      await resumed.signal(id, 'publish', null);
      // The recorded answer is kept (the model is not called again), and the drift is told.
      expect(await resumed.result(id, { timeout: '10s' })).toBe('answer 1');
      expect(drifts).toEqual([{ taskId: id, step: 'summarise' }]);
      expect(fake.prompts).toHaveLength(1);
    } finally {
      await w2.stop();
    }
  });
});
