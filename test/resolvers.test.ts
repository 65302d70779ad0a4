// withResolvers: the promise and settle functions every hot-path promise of the engine comes from
// (one executor for the module, see src/resolvers.ts). Each call's functions settle its own
// promise and no other, however many are pending at once, and a settled promise stays settled.
import { describe, expect, it } from 'vitest';
import { withResolvers } from '../src/resolvers.ts';

describe('withResolvers', () => {
  it('settles each promise with its own functions, however many are pending at once', async () => {
    const all = Array.from({ length: 100 }, () => withResolvers<number>());
    // Settled in reverse order, every third one rejected.
    for (let i = all.length - 1; i >= 0; i--) {
      const r = all[i]!;
      if (i % 3 === 0) r.reject(new Error(`no ${i}`));
      else r.resolve(i);
    }
    const outcomes = await Promise.allSettled(all.map((r) => r.promise));
    outcomes.forEach((o, i) => {
      if (i % 3 === 0) expect(o).toEqual({ status: 'rejected', reason: new Error(`no ${i}`) });
      else expect(o).toEqual({ status: 'fulfilled', value: i });
    });
  });

  it('keeps the first outcome: a later resolve or reject changes nothing', async () => {
    const r = withResolvers<string>();
    r.resolve('first');
    r.reject(new Error('late'));
    r.resolve('second');
    await expect(r.promise).resolves.toBe('first');
  });

  it('adopts a promise it is resolved with', async () => {
    const inner = withResolvers<string>();
    const outer = withResolvers<string>();
    outer.resolve(inner.promise);
    inner.resolve('through');
    await expect(outer.promise).resolves.toBe('through');
  });

  it('makes a pending promise: nothing settles it but its own functions', async () => {
    const r = withResolvers<void>();
    withResolvers<void>().resolve();
    const state = await Promise.race([r.promise.then(() => 'settled'), new Promise((resolve) => setTimeout(() => resolve('pending'), 20))]);
    expect(state).toBe('pending');
  });
});
