/**
 * @module commands/setup
 * What an engine builds from its options once: checked limits and observers, and the idempotency
 * records service (`engine.idempotency`) on the engine's store or the backend given.
 */
import { InvalidArgumentError } from '../errors.ts';
import { notify, type Observer } from '../observers.ts';
import { DEFAULT_LIMITS, PAYLOAD_STORE_LIMITS, resolveLimits, type Limits } from '../limits.ts';
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import { Idempotency } from '../idempotency/run.ts';
import type { IdempotencyBackend } from '../idempotency/records.ts';
import type { CommandContext } from './context.ts';
import { LAYERS } from '../payloads/layered-store.ts';
import { sealedRecords } from '../payloads/sealed-writes.ts';

const LIMIT_OPTIONS = optionNames<Limits>()('inputBytes', 'outputBytes', 'payloadBytes', 'childDepth');

export function engineLimits(limits: Limits | undefined, payloadStore = false): Required<Limits> {
  checkOptionKeys(limits, LIMIT_OPTIONS, 'new Engine({ limits })');
  return resolveLimits(
    limits,
    (name, v) => {
      if (!Number.isSafeInteger(v) || (v as number) < 1) throw new InvalidArgumentError(`Engine option ${name} must be a whole number of bytes ≥ 1, got ${String(v)}.`);
    },
    payloadStore ? PAYLOAD_STORE_LIMITS : DEFAULT_LIMITS,
  );
}

export function engineObservers(observers: readonly Observer[] | undefined): readonly Observer[] {
  for (const o of observers ?? []) {
    if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('Each observer must be an object with hooks (onRunStart, onStepEnd, onEvent, …).');
  }
  return [...(observers ?? [])];
}

/** `engine.idempotency`: records in `backend`, or in the engine's store (which must keep them). */
export function engineIdempotency(backend: IdempotencyBackend | undefined, ctx: Pick<CommandContext, 'open' | 'clock' | 'observers' | 'appended'>, sealed: boolean): Idempotency {
  let wrapped: IdempotencyBackend | undefined;
  return new Idempotency(
    async () => {
      if (backend && !sealed) return backend;
      const store = await ctx.open();
      // A codec seals records kept elsewhere (Redis) as it seals the store's own.
      if (backend) return (wrapped ??= sealedRecords(LAYERS.get(store)!, backend));
      if (!store.idempotencyRecords) throw new InvalidArgumentError(`The store ${store.description} keeps no idempotency records: pass EngineOptions.idempotency.`);
      return store.idempotencyRecords();
    },
    {
      clock: ctx.clock,
      notify: (e) => notify(ctx.observers, 'onIdempotency', e),
      appendLog: async (taskId, at, entries) => {
        const store = await ctx.open();
        if (store.appendTaskEvents && (await store.appendTaskEvents(taskId, at, entries))) ctx.appended(taskId);
      },
    },
  );
}
