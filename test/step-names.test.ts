// The rule of step names is the same at both ends: whitespace is refused at the start and at the end.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('step names', () => {
  it('refuses whitespace at the end of a step name as it does at the start, and takes spaces inside', async () => {
    const named = workflow('named', async (ctx, name: string) => ctx.step(name, () => 'ran'));
    const engine = makeEngine({ workflows: [named] });
    await startWorker(engine);
    const outcome = async (name: string) => {
      const { id } = await engine.start('named', name);
      await waitForStatus(engine, id, ['succeeded', 'failed']);
      return engine.get(id, { steps: false, history: false });
    };
    for (const bad of [' lead', 'trail ', 'tab\t', '\nboth ']) {
      const info = await outcome(bad);
      expect(info.status).toBe('failed');
      expect(info.status === 'failed' && info.error.message).toContain('no whitespace at the start or end');
    }
    expect((await outcome('fetch the page')).status).toBe('succeeded');
    expect((await outcome('x')).status).toBe('succeeded');
  });
});
