/**
 * @module commands/probe
 * The health probe of an open store: one trivial read with a short deadline, so that
 * `engine.ready()` (and `/healthz` over it) tells whether the store answers now, not whether it
 * once did.
 */
import { StoreUnavailableError, isStepwiseError } from '../errors.ts';
import type { Store } from '../store.ts';

/** How long the probe waits for the store: longer than a healthy round trip, shorter than a health check's timeout. */
export const READY_PROBE_MS = 2000;

/** Resolves when `store` answers a read within {@link READY_PROBE_MS}; rejects with a coded error otherwise. */
export async function probeStore(store: Store, timeoutMs = READY_PROBE_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`The store ${store.description} did not answer within ${timeoutMs} ms.`)), timeoutMs);
  });
  try {
    // A task id no task has: the cheapest read every store offers.
    await Promise.race([store.getTask('-'), late]);
  } catch (e) {
    if (isStepwiseError(e, 'STORE_UNAVAILABLE') || isStepwiseError(e, 'CLOSED')) throw e;
    throw new StoreUnavailableError(`The store ${store.description} does not answer: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  } finally {
    clearTimeout(timer);
  }
}
