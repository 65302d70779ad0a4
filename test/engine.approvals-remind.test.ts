// `remindEvery` of an approval: an interval below the minimum (1 s) is refused when the approval is
// asked for, so that a typo ('0ms', '1ms') cannot flood the log and the observers with reminders.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow, type Duration } from '../src/index.ts';
import { MIN_REMIND_EVERY_MS, nextReminder } from '../src/approvals/policy.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

describe('approval reminders: the shortest interval', () => {
  it.each<[Duration]>([['0ms'], [0], ['1ms'], ['999ms']])(
    'remindEvery %j fails the task with INVALID_ARGUMENT naming remindEvery and the 1s minimum; no approval is created',
    async (every) => {
      const wf = workflow('remind-too-often', async (ctx) => ctx.approval('review', { approvers: ['alice'], remindEvery: every }));
      const engine = makeEngine({ workflows: [wf] });
      await startWorker(engine);
      const { id } = await engine.start(wf);
      await waitForStatus(engine, id, ['failed', 'waiting']);
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error).toMatchObject({ code: ERROR_CODES.INVALID_ARGUMENT });
      expect(info.status === 'failed' && info.error.message).toMatch(/ctx\.approval\("review"\): remindEvery must be at least 1s \(1000 ms\) between reminders/);
      expect(info.approvals).toEqual([]);
    },
  );

  it('remindEvery of exactly 1s is accepted: the task waits on its approval', async () => {
    const wf = workflow('remind-each-second', async (ctx) => ctx.approval('review', { approvers: ['alice'], remindEvery: '1s' }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start(wf);
    await waitForStatus(engine, id, ['waiting', 'failed']);
    const info = await engine.get(id);
    expect(info.status).toBe('waiting');
    expect(info.approvals).toHaveLength(1);
  });

  it('an approval stored with a shorter interval (before the minimum) is reminded at most once per second', () => {
    expect(MIN_REMIND_EVERY_MS).toBe(1000);
    expect(nextReminder(10_000, 1, 10_000)).toBe(11_000);
    expect(nextReminder(10_000, 1, 12_345)).toBe(13_000);
    expect(nextReminder(10_000, 60_000, 12_345)).toBe(70_000);
  });
});

describe('other periodic options', () => {
  it.each([[0], [-5], [Number.NaN]])('a worker refuses dwellScanMs %s (its dwell scanner and approval closer would run in a tight loop)', (ms) => {
    const engine = makeEngine({ workflows: [] });
    expect(() => engine.worker({ dwellScanMs: ms })).toThrow(
      expect.objectContaining({ code: ERROR_CODES.INVALID_ARGUMENT, message: expect.stringContaining('worker option dwellScanMs must be a positive number') }),
    );
  });
});
