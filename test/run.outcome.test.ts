import { describe, expect, it } from 'vitest';
import { CompensationFailedError, NonRetryableError, StoreUnavailableError, TaskCancelledError, WorkerStoppingError, LeaseLostError } from '../src/errors.ts';
import { decodeError } from '../src/serialize.ts';
import type { StepRow } from '../src/store.ts';
import { decideEnd, type EndPlan, type RunOutcome } from '../src/run/outcome.ts';
import {
  RUNNING,
  fatalOf,
  haltOf,
  mayWrite,
  withCancel,
  withDrain,
  withEnd,
  withFatal,
  withLeaseLost,
  withPause,
  withShutdown,
  withStoreLost,
  withoutPause,
  type RunState,
} from '../src/run/state.ts';
import type { Wait } from '../src/run/waits.ts';
import { CODE_RUNNING, inScope, lateHalt, refusalOf } from '../src/run/cleanup-scope.ts';

// The end of a run as a table: (run state, what the code did) → the last transition. No database.

const row = (seq: number, name: string, kind: StepRow['kind'], fields: Partial<StepRow> = {}): StepRow => ({
  taskId: 't1',
  seq,
  name,
  kind,
  status: 'completed',
  output: null,
  error: null,
  attempts: 0,
  startedAt: null,
  finishedAt: null,
  wakeAt: null,
  epoch: 1,
  done: null,
  calledAfter: null,
  businessKey: null,
  ...fields,
});

const sleepWait: Wait = {
  row: row(0, 'nap', 'sleep', { status: 'waiting', wakeAt: 2000 }),
  wakeAt: 2000,
  events: [],
  describe: { kind: 'sleep', step: 'nap', until: 2000 },
};
const eventWait: Wait = {
  row: row(1, 'a', 'event', { status: 'waiting', wakeAt: 1500 }),
  wakeAt: 1500,
  events: ['a'],
  describe: { kind: 'event', event: 'a', step: 'a', until: 1500 },
};
const eventsWait: Wait = {
  row: row(2, 'a+b', 'event', { status: 'waiting' }),
  wakeAt: null,
  events: ['a', 'b'],
  describe: { kind: 'event', events: ['a', 'b'], step: 'a+b', until: null },
};

const oops = new NonRetryableError('oops');
const illegal = new Error('ctx.step("x"): the second argument must be a function');
const stopping = new WorkerStoppingError();
const cancelled = new TaskCancelledError('t1', 'user asked');
const undone = new CompensationFailedError('t1', cancelled, [{ step: 'book', error: new Error('already shipped') }], { reason: 'user asked' });

const base: RunOutcome = {
  result: null,
  refused: 0,
  waits: [],
  journal: new Map(),
  calls: 0,
  taskId: 't1',
  workflowName: 'wf',
  who: 'Task t1 (workflow "wf" version 1)',
  outputBytes: 1000,
};

/** A plan with its encoded error decoded to what matters (name, code, message; not the stack). */
function view(plan: EndPlan | 'lease-lost'): unknown {
  if (plan === 'lease-lost' || !plan.set?.error) return plan;
  const { name, code, message } = decodeError(plan.set.error);
  return { ...plan, set: { ...plan.set, error: { name, code, message } } };
}

const failWith = (name: string, code: string | undefined, message: string): unknown => ({
  event: 'fail',
  set: { error: { name, code, message } },
  detail: { error: message },
});

const running = (hold: RunState['hold'] = 'none'): RunState => ({ kind: 'running', hold });

const ROWS: Array<[label: string, state: RunState, outcome: Partial<RunOutcome>, expected: unknown]> = [
  ['lease lost: write nothing', { kind: 'lost', by: 'lease', halt: new LeaseLostError('t1', 1), fatal: null, cancel: null, hold: 'none' }, { result: { ok: true, value: 1 } }, 'lease-lost'],
  [
    'database stayed away, after a cancel: write nothing',
    { kind: 'lost', by: 'store', halt: new StoreUnavailableError('down'), fatal: null, cancel: { reason: 'x' }, hold: 'pause' },
    { waits: [sleepWait] },
    'lease-lost',
  ],
  [
    'cancelled: abort with the reason, whatever the code did',
    { kind: 'cancelled', reason: 'user asked', halt: cancelled, fatal: null, hold: 'none' },
    { result: { ok: true, value: 1 } },
    { event: 'abort', detail: { reason: 'user asked' } },
  ],
  [
    'cancelled without a reason, after an illegal call: abort',
    { kind: 'cancelled', reason: undefined, halt: stopping, fatal: illegal, hold: 'drain' },
    { waits: [sleepWait] },
    { event: 'abort', detail: { reason: null } },
  ],
  [
    'cancelled, then the cleanup failed for good: fail with its error, over the cancel',
    { kind: 'cancelled', reason: 'user asked', halt: cancelled, fatal: null, hold: 'none' },
    { cleanupFailure: undone },
    {
      event: 'fail',
      set: { error: { name: 'CompensationFailedError', code: 'COMPENSATION_FAILED', message: undone.message } },
      detail: { error: undone.message, reason: 'user asked' },
      overridesCancel: true,
    },
  ],
  [
    "failed, then the cleanup failed for good: fail with the cleanup's error",
    { kind: 'running', hold: 'none' },
    { result: { ok: false, error: oops }, cleanupFailure: undone },
    {
      event: 'fail',
      set: { error: { name: 'CompensationFailedError', code: 'COMPENSATION_FAILED', message: undone.message } },
      detail: { error: undone.message },
      overridesCancel: true,
    },
  ],
  [
    'lease lost during a cleanup that failed: write nothing',
    { kind: 'lost', by: 'lease', halt: new LeaseLostError('t1', 1), fatal: null, cancel: { reason: 'x' }, hold: 'none' },
    { cleanupFailure: undone },
    'lease-lost',
  ],
  [
    'illegal call (fatal): fail with its error',
    { kind: 'failed', error: illegal, halt: null, hold: 'pause' },
    { result: { ok: true, value: 1 }, waits: [sleepWait] },
    failWith('Error', undefined, illegal.message),
  ],
  ['fatal wins over the end of the grace period', { kind: 'failed', error: illegal, halt: stopping, hold: 'none' }, {}, failWith('Error', undefined, illegal.message)],
  [
    "halted (worker stopping): release with the waits' rows",
    { kind: 'stopping', halt: stopping, hold: 'pause' },
    { waits: [sleepWait], result: { ok: true, value: 1 } },
    { event: 'release', steps: [sleepWait.row], detail: { reason: stopping.message } },
  ],
  ["pause → suspend with the waits' rows", running('pause'), { waits: [sleepWait], refused: 1 }, { event: 'suspend', steps: [sleepWait.row], detail: { reason: 'pause requested' } }],
  ['pause while draining → suspend (a pause wins)', running('pause+drain'), {}, { event: 'suspend', steps: [], detail: { reason: 'pause requested' } }],
  ['drain → release', running('drain'), { waits: [sleepWait], refused: 2 }, { event: 'release', steps: [sleepWait.row], detail: { reason: 'worker stopping' } }],
  ['calls refused, pause withdrawn → release', running(), { refused: 1, waits: [sleepWait] }, { event: 'release', steps: [sleepWait.row], detail: { reason: 'pause withdrawn' } }],
  [
    'one wait → park on it',
    running(),
    { waits: [sleepWait] },
    {
      event: 'park',
      steps: [sleepWait.row],
      detail: sleepWait.describe,
      set: { runAt: 2000, wait: JSON.stringify(sleepWait.describe), waitEvents: null },
    },
  ],
  [
    'several waits → park: earliest deadline, union of events, "several"',
    running(),
    { waits: [sleepWait, eventWait, eventsWait] },
    (() => {
      const wait = { kind: 'several', until: 1500, waits: [sleepWait.describe, eventWait.describe, eventsWait.describe] };
      return { event: 'park', steps: [sleepWait.row, eventWait.row, eventsWait.row], detail: wait, set: { runAt: 1500, wait: JSON.stringify(wait), waitEvents: ['a', 'b'] } };
    })(),
  ],
  [
    'waits for events only → park without a deadline',
    running(),
    { waits: [eventsWait] },
    {
      event: 'park',
      steps: [eventsWait.row],
      detail: eventsWait.describe,
      set: { runAt: null, wait: JSON.stringify(eventsWait.describe), waitEvents: ['a', 'b'] },
    },
  ],
  ['nothing to wait for, code not settled → release', running(), {}, { event: 'release', steps: [], detail: { reason: 'run did not settle' } }],
  ['the function threw → fail', running(), { result: { ok: false, error: oops } }, failWith('NonRetryableError', 'NON_RETRYABLE', 'oops')],
  ['the function threw a non-error → fail with it coerced', running(), { result: { ok: false, error: 'boom' } }, failWith('Error', undefined, 'boom')],
  [
    'returned with journal rows left over → fail NON_DETERMINISM',
    running(),
    {
      result: { ok: true, value: 1 },
      calls: 1,
      journal: new Map([
        [0, row(0, 'a', 'step')],
        [2, row(2, 'c', 'sleep')],
        [1, row(1, 'b', 'step')],
      ]),
    },
    failWith(
      'NonDeterminismError',
      'NON_DETERMINISM',
      'Task t1 (workflow "wf" version 1): the workflow returned after 1 step(s), but the journal has 2 more, starting with step "b" at position 1. The code changed while the task was in flight.',
    ),
  ],
  ['unserialisable output → fail NOT_SERIALIZABLE', running(), { result: { ok: true, value: { at: new Date(0) } } }, expect.objectContaining({ event: 'fail' })],
  [
    'ok → complete with the output',
    running(),
    { result: { ok: true, value: { n: 1 } }, calls: 1, journal: new Map([[0, row(0, 'a', 'step')]]) },
    { event: 'complete', set: { output: '{"n":1}' } },
  ],
  ['ok with undefined → complete with no output', running(), { result: { ok: true, value: undefined } }, { event: 'complete', set: { output: null } }],
  [
    'output over the size limit → fail PAYLOAD_TOO_LARGE',
    running(),
    { result: { ok: true, value: 'x'.repeat(2000) } },
    failWith(
      'PayloadTooLargeError',
      'PAYLOAD_TOO_LARGE',
      'The output of workflow "wf" is 2002 bytes as JSON, over the limit of 1000 bytes. Keep large data outside the task (a file or object store) and pass a reference, or raise limits.outputBytes.',
    ),
  ],
];

describe('decideEnd', () => {
  it.each(ROWS)('%s', (_label, state, outcome, expected) => {
    expect(view(decideEnd(state, { ...base, ...outcome }))).toEqual(expected);
  });

  it('names the unserialisable value and the workflow', () => {
    const plan = decideEnd(running(), { ...base, result: { ok: true, value: { at: new Date(0) } } });
    expect(plan).not.toBe('lease-lost');
    const error = decodeError((plan as EndPlan).set?.error as string);
    expect(error.code).toBe('NOT_SERIALIZABLE');
    expect(error.message).toContain('The output of workflow "wf"');
  });
});

describe('run state transitions', () => {
  const make =
    <E extends Error>(e: E) =>
    (): E =>
      e;

  it("keeps the first halt's error while a stronger kind takes over", () => {
    const s1 = withShutdown(RUNNING, make(stopping));
    expect(s1).toMatchObject({ kind: 'stopping', halt: stopping });
    const s2 = withCancel(s1, 'user asked', make(cancelled));
    expect(s2).toMatchObject({ kind: 'cancelled', reason: 'user asked', halt: stopping });
    const s3 = withLeaseLost(s2, make(new LeaseLostError('t1', 1)));
    expect(s3).toMatchObject({ kind: 'lost', by: 'lease', halt: stopping, cancel: { reason: 'user asked' } });
    expect(mayWrite(s3)).toBe(false);
    expect(withCancel(s3, 'again', make(cancelled))).toBe(s3);
  });

  it('an illegal call is kept through a halt and received before it', () => {
    const failed = withFatal(RUNNING, illegal);
    expect(withFatal(failed, new Error('later'))).toBe(failed);
    const s = withCancel(failed, undefined, make(cancelled));
    expect(s).toMatchObject({ kind: 'cancelled', halt: cancelled, fatal: illegal });
    expect(fatalOf(s)).toBe(illegal);
    expect(haltOf(withFatal(RUNNING, illegal))).toBeNull();
    expect(withShutdown(failed, make(stopping))).toMatchObject({ kind: 'failed', error: illegal, halt: stopping });
  });

  it('a database that stays away stops the run only as its first halt', () => {
    const down = new StoreUnavailableError('down');
    expect(withStoreLost(RUNNING, make(down))).toMatchObject({ kind: 'lost', by: 'store', halt: down });
    const s = withCancel(RUNNING, 'x', make(cancelled));
    expect(withStoreLost(s, make(down))).toBe(s);
    expect(withLeaseLost(withStoreLost(RUNNING, make(down)), make(new LeaseLostError('t1', 1)))).toMatchObject({ kind: 'lost', by: 'lease', halt: down });
  });

  it('holds: a pause and a drain together, a withdrawn pause leaves the drain, kept through a halt', () => {
    expect(withPause(withDrain(RUNNING)).hold).toBe('pause+drain');
    expect(withoutPause(withPause(withDrain(RUNNING))).hold).toBe('drain');
    expect(withoutPause(withPause(RUNNING))).toEqual(RUNNING);
    const paused = withPause(RUNNING);
    expect(withPause(paused)).toBe(paused);
    expect(withCancel(withPause(RUNNING), 'x', make(cancelled)).hold).toBe('pause');
  });

  it('the end of the run holds every call for good; a cancel heard after it still counts', () => {
    const ended = withEnd(withPause(RUNNING));
    expect(ended).toEqual({ kind: 'running', hold: 'ended' });
    expect(withDrain(withPause(ended))).toBe(ended);
    expect(withoutPause(ended)).toBe(ended);
    expect(withCancel(ended, 'late', make(cancelled))).toMatchObject({ kind: 'cancelled', reason: 'late', hold: 'ended' });
  });
});

describe('cleanup phases', () => {
  const ended = new Error('cancelled');
  const halt = new TaskCancelledError('t1', 'user asked');
  it("the code's calls start while it runs, are refused with what stopped it, then with the scope's halt", () => {
    expect(refusalOf(CODE_RUNNING)).toBeNull();
    expect(lateHalt(CODE_RUNNING)).toBeNull();
    expect(refusalOf({ kind: 'stopped', ended })).toBe(ended);
    // Before the scope, a step of the code that settles late still counts (no late halt).
    expect(lateHalt({ kind: 'stopped', ended })).toBeNull();
    expect(refusalOf({ kind: 'scope', ended, halt })).toBe(halt);
    expect(lateHalt({ kind: 'over', ended, halt })).toBe(halt);
  });

  it('only the scope itself ignores cancels, pauses and drains', () => {
    expect([CODE_RUNNING, { kind: 'stopped', ended } as const, { kind: 'scope', ended, halt } as const, { kind: 'over', ended, halt } as const].map(inScope)).toEqual([
      false,
      false,
      true,
      false,
    ]);
  });
});
