// Unknown option keys are refused with INVALID_ARGUMENT naming them and the known ones, so a typo
// (idempotencykey) never starts a duplicate or changes nothing silently.
import { describe, expect, it } from 'vitest';
import { isStepwiseError, workflow } from '../src/index.ts';
import { makeEngine } from './support/engine.ts';

const wf = workflow('w', async () => 1);

async function refused(p: Promise<unknown>): Promise<string> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(isStepwiseError(e, 'INVALID_ARGUMENT')).toBe(true);
  return (e as Error).message;
}

describe('unknown option keys', () => {
  it('engine.start refuses a mistyped idempotencyKey instead of starting a duplicate', async () => {
    const engine = makeEngine({ workflows: [wf] });
    const msg = await refused(engine.start('w', {}, { idempotencykey: 'order-1' } as never));
    expect(msg).toContain('engine.start(): unknown option "idempotencykey" (known: by, idempotencyKey, delay, budget, deadline, title, debounce, singleton, priority)');
    expect((await engine.list()).tasks).toHaveLength(0);
    expect(await refused(engine.startMany([{ workflow: 'w', input: 1, idempotencykey: 'x' } as never]))).toContain('startMany(): item 0: unknown option "idempotencykey"');
  });

  it('every command taking an options object names the unknown keys', async () => {
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start('w', {});
    expect(await refused(engine.list({ statuss: 'pending' } as never))).toContain('engine.list(): unknown option "statuss"');
    expect(await refused(engine.count({ workflows: ['w'] } as never))).toContain('engine.count(): unknown option "workflows"');
    expect(await refused(engine.get(id, { step: false } as never))).toContain('engine.get(): unknown option "step"');
    expect(await refused(engine.result(id, { timout: '1s' } as never))).toContain('engine.result(): unknown option "timout"');
    expect(await refused(engine.cancel(id, { reson: 'x' } as never))).toContain('engine.cancel(): unknown option "reson"');
    expect(await refused(engine.pause(id, { reason: 'x' } as never))).toContain('engine.pause(): unknown option "reason"');
    expect(await refused(engine.resume(id, { x: 1 } as never))).toContain('engine.resume(): unknown option "x"');
    expect(await refused(engine.retry(id, { from: 'a' } as never))).toContain('engine.retry(): unknown option "from" (known: by, fromStep, deadline)');
    expect(await refused(engine.signal(id, 'go', null, { key: 'k' } as never))).toContain('engine.signal(): unknown option "key"');
    // Nothing was changed by the refused calls.
    expect((await engine.get(id)).status).toBe('pending');
  });

  it("refuses two versions of one workflow in the engine's list instead of serving only the last", () => {
    const v1 = workflow('article', async () => 1, { version: 1 });
    const v2 = workflow('article', async () => 2, { version: 2 });
    expect(() => makeEngine({ workflows: [v1, v2] })).toThrow(/workflow "article" is listed twice \(versions 1 and 2\).*compatibleVersions: \['1'\]/);
    expect(makeEngine({ workflows: [v1, v1] }).workflows.get('article')).toBe(v1); // the same definition twice is one
  });
});
