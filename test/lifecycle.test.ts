import { describe, expect, it } from 'vitest';
import {
  ALL_EVENTS,
  ALL_STATUSES,
  IllegalTransitionError,
  legalEvents,
  lifecycleDiagram,
  lifecycleEdges,
  sourcesOf,
  transition,
  type LifecycleEvent,
  type TaskStatus,
} from '../src/index.ts';

// The expected table, written out independently of src/lifecycle.ts: status → event → next status.
// `running+pause` is a running task with a pause request; `<status>+cleanup` a task no worker holds
// whose last run left cleanup to do on a cancel (onCancel handlers, compensations).
const EXPECTED: Record<string, Partial<Record<LifecycleEvent, TaskStatus>>> = {
  pending: { claim: 'running', cancel: 'cancelled', pause: 'paused' },
  waiting: { claim: 'running', cancel: 'cancelled', pause: 'paused', expire: 'failed' },
  running: {
    reclaim: 'running',
    park: 'waiting',
    release: 'pending',
    complete: 'succeeded',
    fail: 'failed',
    cancel: 'cancelling',
    pause: 'running',
    // dwell.running: the scanner writes the error; the run that holds the task fails with it.
    expire: 'running',
  },
  'running+pause': {
    reclaim: 'running',
    park: 'waiting',
    release: 'pending',
    suspend: 'paused',
    complete: 'succeeded',
    fail: 'failed',
    cancel: 'cancelling',
    resume: 'running',
    expire: 'running',
  },
  paused: { resume: 'pending', cancel: 'cancelled', expire: 'failed' },
  // A cancel must let a worker run the cleanup: through cancelling, reclaimed at once.
  'pending+cleanup': { claim: 'running', cancel: 'cancelling', pause: 'paused' },
  // A dwell failure must let a worker run the compensations: the task is made due with its error.
  'waiting+cleanup': { claim: 'running', cancel: 'cancelling', pause: 'paused', expire: 'waiting' },
  'paused+cleanup': { resume: 'pending', cancel: 'cancelling', expire: 'pending' },
  // A cancelling task whose worker died is reclaimed to finish its cleanup; a cleanup that fails for good fails it;
  // a run that ended without the cleanup of a cancel that came as it ended hands it over (release).
  cancelling: { reclaim: 'cancelling', release: 'cancelling', fail: 'failed', abort: 'cancelled' },
  // A succeeded or cancelled task is retried only from a step the user names (the command checks).
  succeeded: { retry: 'pending' },
  failed: { retry: 'pending' },
  cancelled: { retry: 'pending' },
};

const states = [
  ...ALL_STATUSES.map((status) => ({ label: status as string, state: { status, pauseRequested: false } })),
  { label: 'running+pause', state: { status: 'running' as TaskStatus, pauseRequested: true } },
  ...(['pending', 'waiting', 'paused'] as const).map((status) => ({ label: `${status}+cleanup`, state: { status, pauseRequested: false, hasCleanup: true } })),
];
const VARIANTS: Record<string, { label: string; on: string; off: string }> = {
  running: { label: 'running+pause', on: 'pause requested', off: 'no pause request' },
  pending: { label: 'pending+cleanup', on: 'cleanup to run', off: 'no cleanup' },
  waiting: { label: 'waiting+cleanup', on: 'cleanup to run', off: 'no cleanup' },
  paused: { label: 'paused+cleanup', on: 'cleanup to run', off: 'no cleanup' },
};

describe('lifecycle transition table', () => {
  const cases = states.flatMap(({ label, state }) => ALL_EVENTS.map((event) => ({ label, state, event })));

  it('covers every status and event', () => {
    expect(cases).toHaveLength((ALL_STATUSES.length + 4) * ALL_EVENTS.length);
    expect(Object.keys(EXPECTED).sort()).toEqual(states.map((s) => s.label).sort());
  });

  it.each(cases)('$label --$event-->', ({ label, state, event }) => {
    const expected = EXPECTED[label]?.[event];
    if (expected === undefined) {
      let thrown: unknown;
      try {
        transition(state, event, 'task-1');
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(IllegalTransitionError);
      const err = thrown as IllegalTransitionError;
      expect(err.code).toBe('ILLEGAL_TRANSITION');
      expect(err.event).toBe(event);
      expect(err.status).toContain(state.status);
      // Only what a person can send: workers' events (claim, park, complete…) are not offered.
      const sendable = Object.keys(EXPECTED[label] ?? {}).filter((ev) => ['cancel', 'pause', 'resume', 'retry'].includes(ev));
      expect(err.legalEvents).toEqual(sendable.sort((a, b) => ALL_EVENTS.indexOf(a as LifecycleEvent) - ALL_EVENTS.indexOf(b as LifecycleEvent)));
      expect(err.message).toContain(`"${event}" is not legal from ${state.status}`);
      expect(err.message).toContain('task-1');
    } else {
      expect(transition(state, event).to).toBe(expected);
    }
  });

  it('lists the legal events of a state in table order', () => {
    expect(legalEvents({ status: 'failed' })).toEqual(['retry']);
    expect(legalEvents({ status: 'succeeded' })).toEqual(['retry']);
    expect(legalEvents({ status: 'running', pauseRequested: true })).toContain('resume');
    expect(legalEvents({ status: 'running' })).not.toContain('resume');
  });

  it('names the legal events in the error message of a finished task', () => {
    expect(() => transition({ status: 'cancelled' }, 'resume')).toThrow(/Legal events: retry/);
    expect(() => transition({ status: 'failed' }, 'cancel')).toThrow(/Legal events: retry/);
  });

  it('gives the store the source statuses of each event', () => {
    expect(sourcesOf('claim').sort()).toEqual(['pending', 'waiting']);
    expect(sourcesOf('reclaim')).toEqual(['running', 'cancelling']);
    expect(sourcesOf('fail')).toEqual(['running', 'cancelling']);
    expect(sourcesOf('cancel').sort()).toEqual(['paused', 'pending', 'running', 'waiting']);
    expect(sourcesOf('abort')).toEqual(['cancelling']);
  });

  it('attaches effects that release leases and stamp finished tasks', () => {
    expect(transition({ status: 'running' }, 'complete').effects).toEqual(expect.arrayContaining(['release-lease', 'finish']));
    expect(transition({ status: 'running' }, 'cancel').effects).toEqual(['abort-run']);
    expect(transition({ status: 'failed' }, 'retry').effects).toEqual(['schedule-now']);
    expect(transition({ status: 'cancelling' }, 'reclaim').effects).toEqual(['acquire-lease']);
    expect(transition({ status: 'cancelling' }, 'fail').effects).toEqual(['release-lease', 'clear-pause-request', 'finish']);
    expect(transition({ status: 'cancelling' }, 'release').effects).toEqual(['expire-lease']);
    expect(transition({ status: 'running', pauseRequested: true }, 'suspend').pauseRequested).toBe(true);
    expect(transition({ status: 'waiting', hasCleanup: true }, 'cancel').effects).toEqual(['expire-lease']);
    expect(transition({ status: 'waiting' }, 'cancel').effects).toEqual(['finish']);
  });

  it('draws the diagram with exactly the edges of the table, each once, with its condition', () => {
    const lines = lifecycleDiagram()
      .split('\n')
      .slice(1)
      .map((l) => l.trim());
    const drawn = lines.filter((l) => !l.startsWith('[*]') && !l.endsWith('[*]'));
    // The expected edges, from the independent table: an edge the same in both states of a status
    // is drawn once without a condition; one that differs carries each state as its condition.
    const expected = new Set<string>();
    for (const status of ALL_STATUSES) {
      const plain = EXPECTED[status] ?? {};
      const variant = VARIANTS[status];
      const other = variant ? (EXPECTED[variant.label] ?? {}) : plain;
      for (const event of ALL_EVENTS) {
        const a = plain[event];
        const b = other[event];
        if (a && b && a === b) expected.add(`${status} --> ${a}: ${event}`);
        else {
          if (a) expected.add(`${status} --> ${a}: ${event} (${variant?.off})`);
          if (b) expected.add(`${status} --> ${b}: ${event} (${variant?.on})`);
        }
      }
    }
    expect(new Set(drawn)).toEqual(expected);
    expect(drawn).toHaveLength(expected.size);
    expect(lines).toContain('[*] --> pending: create');
    for (const s of ['succeeded', 'failed', 'cancelled']) expect(lines).toContain(`${s} --> [*]`);
    expect(lifecycleDiagram('cancelling')).toContain('class cancelling current');
    expect(lifecycleEdges()).toHaveLength(expected.size);
  });
});
