// The dwell scanner is a job of the worker's periodic scheduler: besides its real-time period
// (dwellScanMs), it runs again when the earliest bound its last scan saw passes on the engine's
// clock, so a task past its bound is acted on without waiting for the next period.
import { describe, expect, it } from 'vitest';
import { Engine, openStore, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { gate, tempDbUrl, waitForStatus } from './support/engine.ts';
import { spyStore } from './support/store-spy.ts';

describe('the dwell scanner on the periodic scheduler', () => {
  it('wakes at the earliest bound it saw on the engine clock, long before its next period', async () => {
    const clock = new ManualClock();
    const wf = workflow('dwell-wake', async (ctx) => ctx.waitForEvent('go'), { dwell: { paused: { after: '2h', then: 'cancel' } } });
    const inner = await openStore(tempDbUrl());
    const seen = gate();
    let id = '';
    const store = spyStore(inner, {
      listTasks: (original) => async (q) => {
        const rows = await original(q);
        // Once the scan has finished with these rows (the rest of it reads nothing more).
        if (q.statuses?.includes('paused') && rows.some((r) => r.id === id)) setImmediate(() => seen.open());
        return rows;
      },
    });
    const engine = new Engine({ store, workflows: [wf], clock });
    try {
      id = (await engine.start(wf)).id;
      await engine.pause(id, { by: 'ops' });
      // Its period is ten minutes of real time: only the wake-up at the bound can act within the test.
      const worker = engine.worker({ dwellScanMs: 600_000, pollIntervalMs: 20 });
      await worker.start();
      await seen.promise; // the first scan saw the paused task, whose bound is 2 h ahead
      await clock.advance('2h');
      await waitForStatus(engine, id, 'cancelled', 10_000);
      expect((await engine.get(id)).cancelReason).toBe('stayed paused longer than 7200000ms (dwell.paused)');
      await worker.stop();
    } finally {
      await engine.close();
      await store.close();
    }
  });
});
