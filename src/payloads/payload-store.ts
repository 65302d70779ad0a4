/**
 * @module payloads/payload-store
 * Internal: not part of the public API.
 * The payload store, as a layer around any Store: the kernel and the SQL stores keep passing JSON
 * text; this layer decides what a payload column holds.
 *
 * On the way in, a payload whose JSON is at least `threshold` long (or that holds the token
 * escape itself) becomes a tree of blobs (payloads/tree.ts) and its column holds a reference
 * token; with a codec, every other payload is sealed in place. The blobs are written, with the
 * tasks that hold them, before the write that refers to them (and to an external backend before
 * their rows): a crash in between leaves blobs a task holds or no row names, never a reference
 * without its bytes. A write's own entries in the log embed the token instead of the value.
 *
 * On the way out, every string a store call returns that holds a token gets the value back:
 * the trees are read a level at a time, one batch read per level for all tokens of the result,
 * through a cache of decoded blobs (a resumed agent loop reads each message once).
 *
 * Owners: the task a value belongs to holds its blobs; a child's output is also held by its parent
 * (the parent's signal embeds it); a fork holds every blob of its source.
 */
import type { Store, TransitionWrite, WriteOp, NewEvent, NewTask, StepRow, BlobRow, BlobWrite } from '../store.ts';
import { PayloadUnreadableError } from '../errors.ts';
import type { PayloadCodec } from './codec.ts';
import type { BlobBackend } from './backends.ts';
import { Packer } from './pack.ts';
import { TOKEN_PATTERN, hasMark, refToken, sealedToken } from './token.ts';
import { DEFAULT_SHAPE, TreeBuilder, build, type BuiltTexts, type TreeShape } from './tree.ts';
import { ContentCache } from './cache.ts';
import { collect, messageOf, nextFrontier, refRoots, replaceAll, replaceValue, unknownTo } from './walk.ts';
import { collectBlobs } from './collection.ts';
import { faultPoint } from '../fault-points.ts';

export interface PayloadLayerOptions {
  /** Payloads whose JSON is at least this many characters go to blobs; false: none do. */
  threshold: number | false;
  codec: PayloadCodec | null;
  /** Null: blob bytes in the database. */
  backend: BlobBackend | null;
  /** The time a write touches its blobs at (ms). */
  now: () => number;
  shape?: TreeShape;
  /** Characters of decoded blob content kept in memory for reads. @defaultValue 32 Mi */
  cacheChars?: number;
}

/** What one write stored in blobs or sealed: its blobs by owner set, and each token's original text. */
class Pending {
  readonly groups = new Map<string, { owners: string[]; blobs: Map<string, Uint8Array> }>();
  readonly tokens = new Map<string, string>();
  add(owners: readonly string[], blobs: ReadonlyMap<string, Uint8Array>): void {
    const key = owners.join('\u0000');
    let g = this.groups.get(key);
    if (!g) this.groups.set(key, (g = { owners: [...owners], blobs: new Map() }));
    for (const [h, b] of blobs) g.blobs.set(h, b);
  }
}

const decoder = new TextDecoder();
/** Log entry keys under which a write's entries embed its payloads. */
const EMBED_KEYS = ['output', 'error', 'payload', 'input'] as const;
/** Tasks whose held blobs this process remembers (a task's later writes skip blobs it already holds). */
const HELD_TASKS = 2_000;

export class PayloadLayer {
  readonly inner: Store;
  readonly #o: PayloadLayerOptions;
  readonly #packer: Packer;
  readonly #shape: TreeShape;
  readonly #cache: ContentCache;
  /** Texts of inner nodes built for earlier reads (see `build`). */
  readonly #built: ContentCache;
  /** Recorded values loaded by replays (`resolvePayloads`): calls, values, and the most in one call. */
  readonly replayLoads = { calls: 0, values: 0, most: 0 };
  /** Task → blobs it is known to hold (recorded by a committed putBlobs). */
  readonly #held = new Map<string, Set<string>>();

  constructor(inner: Store, options: PayloadLayerOptions) {
    this.inner = inner;
    this.#o = options;
    this.#packer = new Packer(options.codec);
    this.#shape = options.shape ?? DEFAULT_SHAPE;
    this.#cache = new ContentCache(options.cacheChars ?? 32 * 1024 * 1024);
    this.#built = new ContentCache((options.cacheChars ?? 32 * 1024 * 1024) / 2);
  }

  /** Whether writes can be done synchronously (the database keeps the bytes and the store has sync writes). */
  get syncWrites(): boolean {
    return this.#o.backend === null && typeof this.inner.putBlobsNow === 'function' && typeof this.inner.writeBatchNow === 'function';
  }

  // ---- the way in ----

  /** The column text for a payload: a reference to its blobs, the payload sealed, or itself. */
  encode(p: Pending, text: string | null | undefined, owners: readonly string[] | null): string | null | undefined {
    if (text === null || text === undefined) return text;
    const t = this.#o.threshold;
    if (owners && owners.length && t !== false && (text.length >= t || hasMark(text))) {
      const tree = new TreeBuilder((c) => this.#packer.address(c), this.#shape);
      const token = refToken(tree.root(JSON.parse(text), text));
      p.add(owners, tree.blobs);
      p.tokens.set(token, text);
      return token;
    }
    if (this.#o.codec) {
      const token = sealedToken(this.#packer.seal(text));
      p.tokens.set(token, text);
      return token;
    }
    return text;
  }

  /** Whether a codec seals what stays in rows. */
  get sealing(): boolean {
    return this.#o.codec !== null;
  }

  /** A row read inside a store's transaction with its sealed values opened (no I/O: blob references stay). */
  openRow<T>(row: T): T {
    return replaceAll(structuredClone(row), (s) => s.replace(TOKEN_PATTERN, (whole, kind: string, body: string) => (kind === 'e' ? this.#packer.unseal(body) : whole))) as T;
  }

  /** A payload that only a codec changes (no owner task: idempotency results, schedule inputs, stream frames). */
  seal(p: Pending, text: string | null | undefined): string | null | undefined {
    return this.encode(p, text, null);
  }

  /** Entries that embed a payload of this write embed its token instead. */
  fixLog(p: Pending, entries: readonly NewEvent[]): NewEvent[] {
    if (!p.tokens.size) return entries as NewEvent[];
    return entries.map((e) => {
      if (!e.data) return e;
      let data = e.data;
      for (const [token, text] of p.tokens) {
        for (const key of EMBED_KEYS) data = replaceValue(data, `"${key}":`, text, token);
      }
      return data === e.data ? e : { ...e, data };
    });
  }

  #blobsToWrite(p: Pending): Array<{ owners: string[]; blobs: Array<[string, Uint8Array]> }> {
    const out: Array<{ owners: string[]; blobs: Array<[string, Uint8Array]> }> = [];
    for (const g of p.groups.values()) {
      const blobs = [...g.blobs].filter(([h]) => !g.owners.every((o) => this.#held.get(o)?.has(h)));
      if (blobs.length) out.push({ owners: g.owners, blobs });
    }
    return out;
  }

  #row(hash: string, content: Uint8Array, location: string | null, packed: Uint8Array): BlobRow {
    return { hash, size: content.length, stored: packed.length, data: location === null ? packed : null, location };
  }

  #remember(owners: readonly string[], hashes: Iterable<string>): void {
    const list = [...hashes];
    for (const o of owners) {
      let set = this.#held.get(o);
      if (set) this.#held.delete(o);
      else set = new Set();
      for (const h of list) set.add(h);
      this.#held.set(o, set);
      if (this.#held.size > HELD_TASKS) this.#held.delete(this.#held.keys().next().value!);
    }
  }

  /** Writes the blobs of `p` (and their owners) before the write that refers to them. */
  async flush(p: Pending): Promise<void> {
    const backend = this.#o.backend;
    if (!backend) {
      for (const w of this.blobWrites(p)) {
        await this.inner.putBlobs(w);
        this.#written(w);
      }
      return;
    }
    const at = this.#o.now();
    for (const g of this.#blobsToWrite(p)) {
      const present = await this.inner.touchBlobs({ owners: g.owners, hashes: g.blobs.map(([h]) => h), at });
      const rows: BlobRow[] = [];
      for (const [h, c] of g.blobs) {
        if (present.has(h)) continue;
        const packed = this.#packer.pack(c);
        rows.push(this.#row(h, c, await backend.put(h, packed), packed));
        faultPoint('payloads:bytes-stored');
      }
      await this.inner.putBlobs({ owners: g.owners, at, blobs: rows });
      faultPoint('payloads:blobs-written');
      this.#remember(
        g.owners,
        g.blobs.map(([h]) => h),
      );
    }
  }

  /** {@link flush}, synchronously (see {@link syncWrites}). */
  flushNow(p: Pending): void {
    for (const w of this.blobWrites(p)) {
      this.inner.putBlobsNow!(w);
      this.#written(w);
    }
  }

  /** After a write of blob rows that committed. */
  #written(w: BlobWrite): void {
    faultPoint('payloads:blobs-written');
    this.held([w]);
  }

  /**
   * The blobs of `p` as rows with their bytes in the database: the writes without a backend, and a
   * transactional step's, which keeps them in the database even with a backend (awaiting a
   * backend in its transaction would hold the write lock). Known as held once written ({@link held}).
   */
  blobWrites(p: Pending): BlobWrite[] {
    const at = this.#o.now();
    return this.#blobsToWrite(p).map((g) => ({ owners: g.owners, at, blobs: g.blobs.map(([h, c]) => this.#row(h, c, null, this.#packer.pack(c))) }));
  }

  /** Records the blobs of writes that committed as held by their owners (see {@link blobWrites}). */
  held(writes: readonly BlobWrite[]): void {
    for (const w of writes) this.#remember(w.owners, hashesOf(w.blobs));
  }

  /** The ops of a write with their payloads encoded (the op itself when none changes). */
  op(p: Pending, op: WriteOp): WriteOp {
    if (op.kind !== 'step') return this.transition(p, op);
    const step = this.#step(p, op.step, [op.taskId]);
    return step === op.step ? op : { ...op, step };
  }

  transition(p: Pending, w: TransitionWrite): TransitionWrite {
    const owners = w.parentSignal ? [w.taskId, w.parentSignal.taskId] : [w.taskId];
    const output = w.set.output === undefined ? undefined : (this.encode(p, w.set.output, owners) as string | null);
    const error = w.set.error === undefined ? undefined : (this.seal(p, w.set.error) as string | null);
    const steps = w.steps?.map((s) => this.#step(p, s, [w.taskId]));
    if (output === w.set.output && error === w.set.error && (!steps || steps.every((s, i) => s === w.steps![i]))) return w;
    const set = { ...w.set, ...(output !== undefined ? { output } : {}), ...(error !== undefined ? { error } : {}) };
    // This write's own payloads only: the log embeds them, not another op's.
    const own = new Map<string, string>();
    for (const [orig, token] of [
      [w.set.output, output],
      [w.set.error, error],
    ] as const)
      if (typeof orig === 'string' && typeof token === 'string' && orig !== token) own.set(token, orig);
    // The log's account of a failure repeats the error's message (`detail.error`): sealed with it.
    const message = this.#o.codec && typeof w.set.error === 'string' ? messageOf(w.set.error) : null;
    if (message !== null) own.set(this.seal(p, message) as string, message);
    return { ...w, set, ...(steps ? { steps } : {}), log: this.fixLog({ tokens: own } as Pending, w.log) };
  }

  #step(p: Pending, s: StepRow, owners: readonly string[]): StepRow {
    if (s.output === null && s.error === null) return s;
    const output = this.encode(p, s.output, owners) as string | null;
    const error = this.seal(p, s.error) as string | null;
    return output === s.output && error === s.error ? s : { ...s, output, error };
  }

  newTask<T extends NewTask>(p: Pending, task: T): T {
    return { ...task, input: this.encode(p, task.input, [task.id]) as string | null };
  }

  // ---- the way out ----

  /**
   * `value` with the tokens of its payload columns replaced by their payloads (in place, for plain
   * objects and arrays; see walk.ts for which strings are columns). `texts`: `value` is a list of
   * column texts.
   */
  resolve<T>(value: T, p?: Pending, texts = false): T | Promise<T> {
    const found = collect(value, texts);
    if (!found.size) return value;
    return this.#resolveFound(value, found, p, texts);
  }

  async #resolveFound<T>(value: T, found: Set<string>, p: Pending | undefined, all: boolean): Promise<T> {
    const texts = await this.#texts(unknownTo(found, p?.tokens));
    return replaceAll(value, (s) => this.#substitute(s, texts, p), all) as T;
  }

  /** {@link resolve} on a synchronous driver, for the results of synchronous writes. */
  resolveNow<T>(value: T, p?: Pending): T {
    const found = collect(value);
    if (!found.size) return value;
    const roots = refRoots(unknownTo(found, p?.tokens));
    const contents = new Map<string, string>();
    const built = this.#pinBuilt();
    let frontier = roots;
    while (frontier.length) {
      const missing = this.#fromCache(frontier, contents);
      if (missing.length) this.#decode(missing, this.inner.getBlobsNow!(missing), contents, new Map());
      frontier = nextFrontier(frontier, contents, built.has);
    }
    const texts = new Map(roots.map((r) => [r, build(r, contents, built)]));
    return replaceAll(value, (s) => this.#substitute(s, texts, p)) as T;
  }

  async #texts(strings: ReadonlySet<string>): Promise<Map<string, string>> {
    const roots = refRoots(strings);
    const contents = new Map<string, string>();
    const built = this.#pinBuilt();
    let frontier = roots;
    while (frontier.length) {
      const missing = this.#fromCache(frontier, contents);
      if (missing.length) {
        const stored = await this.inner.getBlobs(missing);
        const external = new Map<string, Uint8Array | null>();
        if (this.#o.backend) {
          const backend = this.#o.backend;
          await Promise.all([...stored].filter(([, b]) => b.data === null && b.location !== null).map(async ([h, b]) => external.set(h, await backend.get(b.location!))));
        }
        this.#decode(missing, stored, contents, external);
      }
      frontier = nextFrontier(frontier, contents, built.has);
    }
    return new Map(roots.map((r) => [r, build(r, contents, built)]));
  }

  /**
   * The texts of inner nodes built before, for one read: a node found there is not read again (nor
   * its subtree), and stays available to this read even if the cache lets it go meanwhile.
   */
  #pinBuilt(): BuiltTexts & { has: (hash: string) => boolean } {
    const pinned = new Map<string, string>();
    const cache = this.#built;
    return {
      has: (hash) => {
        const t = cache.get(hash);
        if (t !== undefined) pinned.set(hash, t);
        return t !== undefined;
      },
      get: (hash) => pinned.get(hash),
      set: (hash, text) => cache.set(hash, text),
    };
  }

  #fromCache(hashes: readonly string[], into: Map<string, string>): string[] {
    const missing: string[] = [];
    for (const h of hashes) {
      if (into.has(h)) continue;
      const c = this.#cache.get(h);
      if (c === undefined) missing.push(h);
      else into.set(h, c);
    }
    return missing;
  }

  #decode(
    hashes: readonly string[],
    stored: ReadonlyMap<string, { data: Uint8Array | null; location: string | null }>,
    into: Map<string, string>,
    external: ReadonlyMap<string, Uint8Array | null>,
  ): void {
    for (const h of hashes) {
      const b = stored.get(h);
      const bytes = b?.data ?? (b?.location ? external.get(h) : null);
      if (!b || !bytes) {
        throw new PayloadUnreadableError(
          b?.location
            ? `Blob ${h} is recorded at ${b.location} but ${this.#o.backend ? this.#o.backend.description : 'no blob backend is configured'} has no bytes there.`
            : `Blob ${h} is referenced but not stored: the payload store lost it (restored from an older backup?).`,
        );
      }
      const raw = this.#packer.unpack(bytes, h);
      // A blob is what its address says: bytes altered or swapped in the store do not pass. (With a
      // codec, the cipher authenticates the bytes; an address made under a key rotated since differs.)
      if (!this.#o.codec && this.#packer.address(raw) !== h) throw new PayloadUnreadableError(`Blob ${h} does not match its address: its bytes were altered or belong to another blob.`);
      const content = decoder.decode(raw);
      this.#cache.set(h, content);
      into.set(h, content);
    }
  }

  #substitute(s: string, texts: ReadonlyMap<string, string>, p?: Pending): string {
    const own = p?.tokens.get(s);
    if (own !== undefined) return own;
    return s.replace(TOKEN_PATTERN, (whole, kind: string, body: string) => {
      const mine = p?.tokens.get(whole);
      if (mine !== undefined) return mine;
      if (kind === 'e') return this.#packer.unseal(body);
      return texts.get(body)!;
    });
  }

  /** Deletes at most `limit` blobs no task holds, untouched since `before`, with their bytes in a backend; returns how many. */
  collect(before: number, limit: number): Promise<number> {
    return collectBlobs(this.inner, this.#o.backend, before, limit);
  }

  newPending(): Pending {
    return new Pending();
  }
}

export type { Pending };

const hashesOf = (blobs: readonly BlobRow[]): string[] => blobs.map((b) => b.hash);
