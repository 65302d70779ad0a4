/**
 * @module group-commit
 * Internal: not part of the public API.
 * The group-commit skeleton both batchers share: requests made in one tick are queued and written
 * together, at most `maxBatch` per batch and `maxInFlight` batches at once; a finished batch starts
 * the next. What a batch does (and how its requests are answered) is the caller's `commit`.
 *
 * With `keyOf` (the task a write is for), a request whose key has a batch in flight waits for that
 * batch to finish instead of going out in another one: in the database it would only queue on the
 * same row lock until that batch commits, and each would pay a commit of its own. Held back, a
 * key's requests go out together, in order, in the next batch.
 */

import { withResolvers } from './resolvers.ts';

/** A queued request and how to answer it. */
export interface Pending<I, O> {
  item: I;
  resolve: (r: O) => void;
  reject: (e: unknown) => void;
}

/** The keys of a batch's items (a loop of the module, not a per-call closure: see resolvers.ts). */
function keysOf<I, O>(batch: ReadonlyArray<Pending<I, O>>, keyOf: (item: I) => string): Set<string> {
  const keys = new Set<string>();
  for (const p of batch) keys.add(keyOf(p.item));
  return keys;
}

export class GroupCommit<I, O> {
  readonly #commit: (batch: Array<Pending<I, O>>) => Promise<void>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #keyOf: ((item: I) => string) | undefined;
  #queue: Array<Pending<I, O>> = [];
  #inFlight = 0;
  #scheduled = false;
  /** Keys with a batch in flight: how many batches each. */
  readonly #busy = new Map<string, number>();

  constructor(commit: (batch: Array<Pending<I, O>>) => Promise<void>, maxBatch: number, maxInFlight = 1, keyOf?: (item: I) => string) {
    this.#commit = commit;
    this.#maxBatch = maxBatch;
    this.#maxInFlight = Math.max(1, maxInFlight);
    this.#keyOf = keyOf;
  }

  /** Requests queued and not yet in a batch. */
  get queued(): number {
    return this.#queue.length;
  }

  /** Batches (or direct writes, see {@link begin}) under way. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Queues `item` for a batch of this tick (or the next one once room frees up). */
  enqueue(item: I): Promise<O> {
    const { promise, resolve, reject } = withResolvers<O>();
    this.#queue.push({ item, resolve, reject });
    this.#schedule();
    return promise;
  }

  /**
   * A write made outside a batch counts as one in flight until {@link end}; with `item`, its key is
   * busy until then too (the key's queued requests wait for it).
   */
  begin(item?: I): void {
    this.#inFlight++;
    if (item !== undefined && this.#keyOf) this.#hold(new Set([this.#keyOf(item)]));
  }

  end(item?: I): void {
    if (item !== undefined && this.#keyOf) this.#release(new Set([this.#keyOf(item)]));
    this.#inFlight--;
    this.#pump();
  }

  /** Queues `item` ahead of everything queued (a write made outside a batch that is to be tried again, before its key's later ones). */
  enqueueFirst(item: I): Promise<O> {
    const { promise, resolve, reject } = withResolvers<O>();
    this.#queue.unshift({ item, resolve, reject });
    this.#schedule();
    return promise;
  }

  /** A pump at the end of this tick (so that the tick's requests go together), if there is room. */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  /** Starts batches while there is work and room; each finished batch pumps again. */
  #pump(): void {
    while (this.#queue.length && this.#inFlight < this.#maxInFlight) {
      const batch = this.#keyOf ? this.#takeFree(this.#keyOf) : this.#queue.splice(0, this.#maxBatch);
      if (!batch.length) return; // every queued request waits for its key's batch
      this.#inFlight++;
      const keys = this.#keyOf ? this.#hold(keysOf(batch, this.#keyOf)) : null;
      void this.#commit(batch).finally(() => {
        if (keys) this.#release(keys);
        this.end();
      });
    }
  }

  /** Up to `maxBatch` queued requests, in order, of keys with no batch in flight; the others stay queued, in order. */
  #takeFree(keyOf: (item: I) => string): Array<Pending<I, O>> {
    if (!this.#busy.size) return this.#queue.splice(0, this.#maxBatch);
    const batch: Array<Pending<I, O>> = [];
    const kept: Array<Pending<I, O>> = [];
    for (const p of this.#queue) {
      if (batch.length < this.#maxBatch && !this.#busy.has(keyOf(p.item))) batch.push(p);
      else kept.push(p);
    }
    this.#queue = kept;
    return batch;
  }

  /** Marks `keys` busy (once more each); returns them, to release when their writes finish. */
  #hold(keys: Set<string>): Set<string> {
    for (const k of keys) this.#busy.set(k, (this.#busy.get(k) ?? 0) + 1);
    return keys;
  }

  #release(keys: ReadonlySet<string>): void {
    for (const k of keys) {
      const n = (this.#busy.get(k) ?? 1) - 1;
      if (n > 0) this.#busy.set(k, n);
      else this.#busy.delete(k);
    }
  }
}
