// Pinning a task to a workflow version: only workers running that version take it (a canary, or
// an old version finishing a migration); a version no worker runs or has run is refused.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { TEST_STORE, makeEngine, startWorker, tempDbUrl, waitForStatus } from './support/engine.ts';

const v1 = workflow('report', async () => 'v1', { version: 1 });
const v2 = workflow('report', async () => 'v2', { version: 2 });

describe(`version pinning (${TEST_STORE})`, () => {
  it('runs a task pinned to the old version on an old worker only; refuses an unknown version', async () => {
    const url = tempDbUrl();
    const old = makeEngine({ store: url, workflows: [v1] });
    const current = makeEngine({ store: url, workflows: [v2] });
    // The new version's worker is up; the old version was registered by a worker that ran before.
    const w1 = await startWorker(old);
    await w1.stop();
    const w2 = await startWorker(current);
    try {
      const pinned = await current.start('report', {}, { version: '1' });
      const latest = await current.start('report', {});
      expect(await current.result(latest.id, { timeout: '10s' })).toBe('v2');
      const t = await current.get(pinned.id);
      expect(t).toMatchObject({ workflowVersion: '1', status: 'pending' });
      expect((await current.explain(pinned.id)).summary).toContain('started under version 1 of "report" and live workers serve only version(s) 2');
      // An old worker comes back and takes it.
      const back = await startWorker(old);
      try {
        expect(await current.result(pinned.id, { timeout: '10s' })).toBe('v1');
      } finally {
        await back.stop();
      }
      await expect(current.start('report', {}, { version: '7' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringContaining('no version "7"') });
      await expect(current.start('report', {}, { version: '' })).rejects.toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      await waitForStatus(current, pinned.id, 'succeeded');
    } finally {
      await w2.stop();
    }
  });
});
