// A run reads the signals sent while it goes on (`RunCore.fetchSignals`). A parked run kept in
// memory and resumed (`RunCore.rearm`) receives the signals not consumed yet with its new claim;
// a read that began before the resume and answers after it must not hand them over again, or the
// code's next event wait would receive a signal its previous one had consumed.
import { describe, expect, it } from 'vitest';
import { RunCore, type RunDeps, type RunParts } from '../src/run/core.ts';
import type { ClaimedTask, SignalRow, TaskRow } from '../src/store.ts';
import { gate } from './support/engine.ts';

function signal(id: number): SignalRow {
  return { id, taskId: 't1', name: 'ping', payload: JSON.stringify(id), idempotencyKey: null, createdAt: id, consumedSeq: null };
}

function claim(epoch: number, signals: SignalRow[]): ClaimedTask {
  const task = { id: 't1', status: 'running', epoch, runs: epoch, retries: 0, createdAt: 0, deadlineAt: null, undoFrom: null } as unknown as TaskRow;
  return { task, event: 'claim', steps: [], signals };
}

const parts: RunParts = {
  replay: () => ({}) as ReturnType<RunParts['replay']>,
  writer: () => ({}) as ReturnType<RunParts['writer']>,
  progress: () => ({}) as ReturnType<RunParts['progress']>,
  checkIdle: () => undefined,
};

/** A store whose reads of pending signals answer what is sent, each answer held until released. */
function signalStore() {
  const sent: SignalRow[] = [];
  const held: Array<() => void> = [];
  const store = {
    pendingSignals: async (_taskId: string, after: number) => {
      const answer = sent.filter((s) => s.id > after);
      const release = gate();
      held.push(() => release.open());
      await release.promise;
      return answer;
    },
  };
  return { sent, held, deps: (): RunDeps => ({ store }) as unknown as RunDeps };
}

describe('signals read by a run', () => {
  it('a read in flight across a resume does not hand over again the signals the new claim carried', async () => {
    const { sent, held, deps } = signalStore();
    const run = new RunCore(claim(1, []), { name: 'w', options: {} } as never, deps(), parts);
    // Signal 1 is sent while the run waits; its news starts a read, which answers after the resume.
    sent.push(signal(1));
    const inFlight = run.fetchSignals();
    await new Promise((r) => setImmediate(r));
    // The run parked meanwhile and is resumed: the claim carries signal 1, which the code consumes.
    run.rearm(claim(2, [signal(1)]), deps());
    expect(run.takeSignal(run.signals.findIndex((s) => s.id === 1)).id).toBe(1);
    held.shift()?.();
    expect(await inFlight).toBe(false);
    expect(run.signals).toEqual([]);
    // A signal sent after the claim is read as usual.
    sent.push(signal(2));
    const next = run.fetchSignals();
    await new Promise((r) => setImmediate(r));
    held.shift()?.();
    expect(await next).toBe(true);
    expect(run.signals.map((s) => s.id)).toEqual([2]);
    expect(run.lastSignalId).toBe(2);
  });

  it('two reads at once hand each signal over once', async () => {
    const { sent, held, deps } = signalStore();
    const run = new RunCore(claim(1, []), { name: 'w', options: {} } as never, deps(), parts);
    sent.push(signal(1));
    const first = run.fetchSignals();
    sent.push(signal(2));
    const second = run.fetchSignals(); // reads again once the first has answered
    await new Promise((r) => setImmediate(r));
    held.shift()?.();
    await first;
    await new Promise((r) => setImmediate(r));
    held.shift()?.();
    expect([await first, await second]).toEqual([true, true]);
    expect(run.signals.map((s) => s.id)).toEqual([1, 2]);
  });
});
