/**
 * @module group-commit
 * Internal: not part of the public API.
 * The group-commit skeleton both batchers share: requests made in one tick are queued and written
 * together, at most `maxBatch` per batch and `maxInFlight` batches at once; a finished batch starts
 * the next. What a batch does (and how its requests are answered) is the caller's `commit`.
 */

/** A queued request and how to answer it. */
export interface Pending<I, O> {
  item: I;
  resolve: (r: O) => void;
  reject: (e: unknown) => void;
}

export class GroupCommit<I, O> {
  readonly #commit: (batch: Array<Pending<I, O>>) => Promise<void>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  #queue: Array<Pending<I, O>> = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(commit: (batch: Array<Pending<I, O>>) => Promise<void>, maxBatch: number, maxInFlight = 1) {
    this.#commit = commit;
    this.#maxBatch = maxBatch;
    this.#maxInFlight = Math.max(1, maxInFlight);
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
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      if (!this.#scheduled && this.#inFlight < this.#maxInFlight) {
        this.#scheduled = true;
        queueMicrotask(() => {
          this.#scheduled = false;
          this.#pump();
        });
      }
    });
  }

  /** A write made outside a batch counts as one in flight until {@link end}. */
  begin(): void {
    this.#inFlight++;
  }

  end(): void {
    this.#inFlight--;
    this.#pump();
  }

  /** Starts batches while there is work and room; each finished batch pumps again. */
  #pump(): void {
    while (this.#queue.length && this.#inFlight < this.#maxInFlight) {
      const batch = this.#queue.splice(0, this.#maxBatch);
      this.#inFlight++;
      void this.#commit(batch).finally(() => this.end());
    }
  }
}
