/**
 * @module primitives/wait-for-event
 * Internal: not part of the public API (the package exports only its index modules).
 * `ctx.waitForEvent(name | names, { timeout })`: receives the first signal sent to the task under
 * one of the names (consumed with the row that records it), or `{ timedOut: true }` once the
 * deadline passed. Until then it is a wait the task may park on, woken by any of the names.
 */
import { WAIT_FOR_EVENT_OPTION_NAMES } from '../api/step.ts';
import { checkCallOptions } from './call-options.ts';
import { optionalMs } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { decodeJson } from '../serialize.ts';
import type { EventResult, WaitForEventOptions } from '../api/step.ts';
import { call, type Primitive } from '../run/call.ts';
import type { Run } from '../run/run.ts';
import { STEP_NAME, journalRow, type Position } from '../run/identity.ts';
import { throwIfHalted } from '../run/state.ts';
import { waitFor } from '../run/waits.ts';

interface EventCall {
  pos: Position;
  names: readonly string[];
  timeoutMs: number | undefined;
}

const EVENT: Primitive<readonly string[], WaitForEventOptions, EventCall, EventResult<unknown>> = {
  kind: 'event',
  replayed: (rec) => decodeJson(rec.output) as EventResult<unknown>,
  prepare: (run, pos, names, options) => {
    checkCallOptions(run, options, WAIT_FOR_EVENT_OPTION_NAMES, `ctx.waitForEvent("${pos.stepId}")`);
    return { pos, names, timeoutMs: optionalMs(options.timeout, `timeout of waitForEvent "${pos.stepId}"`) };
  },
  async start(run, { pos, names, timeoutMs }, activity) {
    const { seq, stepId, recorded } = pos;
    const { clock } = run.deps;
    const now = clock.now();
    const deadline = recorded ? recorded.wakeAt : timeoutMs === undefined ? null : now + timeoutMs;
    const startedAt = recorded?.startedAt ?? now;
    const base = journalRow(run, seq, stepId, 'event', { status: 'waiting', startedAt, wakeAt: deadline });
    /** Receives the first signal of one of the names (sent by `until`, if given), if there is one. */
    const receive = (until: number | null): Promise<EventResult<unknown>> | null => {
      const index = run.signals.findIndex((s) => names.includes(s.name) && (until === null || s.createdAt <= until));
      if (index < 0) return null;
      const signal = run.takeSignal(index);
      const result: EventResult<unknown> = { timedOut: false, name: signal.name, payload: decodeJson(signal.payload) };
      return run.writer.complete({ ...base, status: 'completed', output: JSON.stringify(result), finishedAt: clock.now() }, () => result, { signalId: signal.id, seq });
    };
    const waiting = recorded ?? base;
    const what = names.length === 1 ? { event: names[0] } : { events: names };
    for (;;) {
      // News of a signal that came while no wait was registered (or while reading) is read first.
      while (run.signalNews) await run.fetchSignals().catch(() => false);
      const got = receive(null);
      if (got) return got;
      if (deadline !== null && clock.now() >= deadline) break;
      // Ends at the deadline, or earlier when a signal arrives while the run goes on.
      await waitFor(run, { row: waiting, wakeAt: deadline, events: names, describe: { kind: 'event', ...what, step: stepId, until: deadline } }, activity);
      throwIfHalted(run.state);
    }
    // The deadline passed (in a later run, or in-process while other work went on). A signal sent
    // before it belongs to this wait, even if news of it has not reached this run yet.
    // A failed read is tried again (a few times) before the wait is taken to have timed out.
    for (let attempt = 1; ; attempt++) {
      const fetched = await run.fetchSignals().then(
        () => true,
        () => false,
      );
      if (fetched || attempt >= 5) break;
      await new Promise((r) => setTimeout(r, 200 * attempt));
      throwIfHalted(run.state);
    }
    const late = receive(deadline);
    if (late) return late;
    const result: EventResult<unknown> = { timedOut: true };
    return run.writer.complete({ ...base, status: 'completed', output: JSON.stringify(result), finishedAt: clock.now() }, () => result);
  },
};

export function waitForEvent<T>(run: Run, nameOrNames: string | readonly string[], options: WaitForEventOptions = {}): Promise<EventResult<T>> {
  let names: readonly string[];
  try {
    names = typeof nameOrNames === 'string' ? [nameOrNames] : [...nameOrNames];
    if (!names.length || names.some((n) => typeof n !== 'string' || !STEP_NAME.test(n) || n.includes('+'))) {
      throw run.fail(new InvalidArgumentError(`waitForEvent: ${JSON.stringify(nameOrNames)} is not an event name or a non-empty list of them (1-200 characters, no "#", "|" or "+").`));
    }
  } catch (e) {
    return Promise.reject(e);
  }
  return call(run, EVENT, names.join('+'), names, options) as Promise<EventResult<T>>;
}
