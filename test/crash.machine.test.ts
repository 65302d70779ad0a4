// A state machine's task across a killed worker process (SIGKILL), driven from the CLI as a
// person would: `stepwise send` moves it, refuses what its state does not take, and after the
// crash the next worker resumes it in the state it was in, without running its finished steps again.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { order } from './fixtures/crash-workflows.ts';
import { eventually, tempDir } from './support/engine.ts';
import { readLog, runCli as cli, spawnCli } from './support/processes.ts';

const FIXTURE = 'test/fixtures/crash-workflows.ts';

describe('a state machine across a SIGKILLed worker (SQLite, real processes)', () => {
  it('resumes in the state it was in: the finished step does not run again, the interrupted one runs again with its key, and events are refused while it is busy', async () => {
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'machine.db')}`;
    const log = join(dir, 'effects.log');
    const engine = new Engine({ store: db, workflows: [order] });
    try {
      const { id } = await engine.start(order, { sku: 'book-7', slowMs: 0 });
      const args = ['worker', FIXTURE, '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];
      // Worker A ships for ten minutes: it is surely still shipping when it is killed.
      const a = spawnCli(args, { STEPWISE_TEST_LOG: log, STEPWISE_TEST_SHIP_MS: '600000' });
      await eventually(async () => (await engine.get(id)).machine?.legalEvents.length === 2, 30_000, `the order waiting in review: ${a.output()}`);

      const wrong = cli(['send', id, 'ship', '--db', db]);
      expect(wrong.code).toBe(1);
      expect(wrong.err).toMatch(/^stepwise: \[EVENT_REFUSED\] Cannot send "ship" to task \S+ in state "review": it does not wait for "ship"\. It takes "approve", "reject" now\./);
      expect(cli(['send', id, 'approve', '--db', db, '--as', 'alice', '--key', 'approve-1']).out.trim()).toBe(`Sent "approve" to ${id}`);
      await eventually(() => readLog(log).some((l) => l.event === 'start' && l.pid === a.pid), 30_000, 'worker A to start shipping');
      a.child.kill('SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');

      // No worker runs it now: the machine is busy in fulfilling, and says so.
      const busy = cli(['send', id, 'reject', '--db', db]);
      expect(busy.code).toBe(1);
      expect(busy.err).toMatch(/\[EVENT_REFUSED\] Cannot send "reject" to task \S+ in state "fulfilling": it is busy/);
      expect(cli(['send', id, 'approve', '--db', db, '--key', 'approve-1']).out.trim()).toBe('Already sent (key approve-1; the machine has taken it)');
      const shown = cli(['show', id, '--db', db]);
      expect(shown.out).toMatch(/state +fulfilling since .*; takes no event now/);
      expect(shown.out).toMatch(/states +review -approve-> fulfilling/);

      // A second worker takes it over once the dead one's lease has expired, and finishes it.
      const b = spawnCli(args, { STEPWISE_TEST_LOG: log });
      expect(await engine.result(id, { timeout: '60s' })).toEqual({ state: 'done', context: { sku: 'book-7', slowMs: 0, approvedBy: 'alice' } });
      b.child.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
      const info = await engine.get(id);
      expect(info.machine?.history.map((h) => h.state)).toEqual(['review', 'fulfilling', 'done']);
      const lines = readLog(log);
      const byStep = (event: string, step: string): number[] => lines.filter((l) => l.event === event && l.key === `v1:${id}:${step}#1`).map((l) => l.pid);
      expect(byStep('effect', 'reserve')).toEqual([a.pid]);
      expect(byStep('start', 'ship')).toEqual([a.pid, b.pid]);
      expect(byStep('effect', 'ship')).toEqual([b.pid]);
      expect(cli(['explain', id, '--db', db]).out).toContain('state: done; takes no event now');
    } finally {
      await engine.close();
    }
  }, 120_000);
});
