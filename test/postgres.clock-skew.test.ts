// Leases on PostgreSQL are judged by the database's clock: a worker whose own clock runs 30 s fast
// (longer than the lease) does not see a heartbeating owner's lease as expired, so it never takes
// the task over while the owner still runs its step.
import { describe, expect, it } from 'vitest';
import { Engine, systemClock, workflow, type Clock } from '../src/index.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';
import { gate, schemasOfThisFile } from './support/engine.ts';

const freshSchema = schemasOfThisFile('sw_skew');

describe.skipIf(!(await hasPostgres()))('clock skew on PostgreSQL', () => {
  it('a worker whose clock runs 30 s fast does not take over a task whose owner is heartbeating', async () => {
    const store = `${PG_URL}?schema=${freshSchema()}`;
    const release = gate();
    const started = gate();
    const runsOfLong: string[] = [];
    const long = workflow('long-owner', async (ctx) => {
      await ctx.step('long', async () => {
        runsOfLong.push('run');
        started.open();
        await release.promise;
      });
      return 'done';
    });
    const quick = workflow('quick', async () => 'quick');
    const fast: Clock = { now: () => Date.now() + 30_000, sleep: (ms, signal) => systemClock.sleep(ms, signal) };
    const owner = new Engine({ store, workflows: [long, quick] });
    const skewed = new Engine({ store, workflows: [long, quick], clock: fast });
    try {
      // Leases of 5 s renewed every 100 ms: by the skewed worker's clock every one of them has
      // expired 25 s ago.
      const ownerWorker = owner.worker({ concurrency: 1, leaseMs: 5000, heartbeatMs: 100, pollIntervalMs: 20 });
      await ownerWorker.start();
      const { id } = await owner.start(long, undefined);
      await started.promise;
      expect((await owner.get(id)).lease?.owner).toBe(ownerWorker.id);

      const skewedWorker = skewed.worker({ concurrency: 1, leaseMs: 5000, heartbeatMs: 100, pollIntervalMs: 20 });
      await skewedWorker.start();
      // The skewed worker claims: expired leases come before due tasks, so had it judged the
      // owner's lease by its own clock it would have taken that task instead of this one.
      for (let i = 0; i < 3; i++) {
        const next = await owner.start(quick, undefined);
        expect(await owner.result(next.id, { timeout: '30s' })).toBe('quick');
        expect((await owner.get(next.id)).history.some((e) => e.type === 'transition' && e.actor.id === skewedWorker.id)).toBe(true);
      }
      const info = await owner.get(id);
      expect(info.status).toBe('running');
      expect(info.runs).toBe(1);
      expect(info.lease?.owner).toBe(ownerWorker.id);

      release.open();
      expect(await owner.result(id, { timeout: '30s' })).toBe('done');
      expect(runsOfLong).toEqual(['run']);
      expect((await owner.get(id)).runs).toBe(1);
    } finally {
      release.open();
      await skewed.close();
      await owner.close();
    }
  });
});
