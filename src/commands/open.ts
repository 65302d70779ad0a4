/**
 * @module commands/open
 * Opening an engine's store: open (from a URL) or take the given instance, migrate, subscribe to
 * the news of other processes, and start the log tail that feeds observers' `onEvent`. A failure
 * closes what this call opened, so that the next call can try again.
 */
import { notify, type Observer } from '../observers.ts';
import { LogTail } from '../event-stream.ts';
import type { NewsBus } from '../news.ts';
import type { Store, WakeEvent } from '../store.ts';
import { openStore, type StoreOptions } from '../store-url.ts';
import type { Clock } from '../clock.ts';
import type { ResolvedPayloads } from '../payloads/options.ts';
import { withPayloads } from '../payloads/layered-store.ts';

export interface OpenRequest {
  store: string | Store;
  storeOptions: StoreOptions;
  /** The payload store's options (the store is always layered, for reads at least). */
  payloads: ResolvedPayloads;
  clock: Clock;
  /** This engine in the announcements of its own starts (delivered to its workers when written). */
  origin: string;
  observers: readonly Observer[];
  bus: NewsBus;
  deliver: (e: WakeEvent) => void;
}

/** What an open store holds on to until the engine closes. */
export interface OpenStore {
  store: Store;
  /** Whether the engine opened the store (and so closes it). */
  owned: boolean;
  unsubscribe: (() => Promise<void>) | null;
  tail: LogTail | null;
  offTail: (() => void) | null;
}

export async function openEngineStore(r: OpenRequest): Promise<OpenStore> {
  const owned = typeof r.store === 'string';
  const raw = typeof r.store === 'string' ? await openStore(r.store, r.storeOptions) : r.store;
  const p = r.payloads;
  // Always layered: with `payloads: false` values are written in their rows, and those the payload
  // store kept before are still read.
  const store = withPayloads(raw, { threshold: p.threshold, codec: p.codec, backend: p.backend, now: () => r.clock.now() });
  const opened: OpenStore = { store, owned, unsubscribe: null, tail: null, offTail: null };
  try {
    await store.migrate();
    if (store.subscribe) {
      opened.unsubscribe = await store.subscribe((e) => {
        // Its own starts were delivered to its workers when they were written.
        if (e.origin !== r.origin) r.deliver(e);
      }, 'work');
    }
    if (r.observers.some((o) => typeof o.onEvent === 'function')) {
      const tail = new LogTail(store, (e) => notify(r.observers, 'onEvent', e));
      opened.tail = tail;
      opened.offTail = r.bus.on('log:appended', ({ taskId }) => tail.nudge(taskId));
    }
    return opened;
  } catch (e) {
    if (owned) await store.close().catch(() => undefined);
    throw e;
  }
}

/** Ends what {@link openEngineStore} started, and closes the store if the engine opened it. */
export async function closeEngineStore(opened: OpenStore | null): Promise<void> {
  if (!opened) return;
  await opened.unsubscribe?.();
  opened.offTail?.();
  await opened.tail?.idle();
  if (opened.owned) await opened.store.close();
}
