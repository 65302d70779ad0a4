/**
 * @module payloads/layered-store
 * Internal: not part of the public API.
 * A Store whose payloads go through a {@link PayloadLayer}: the writes that carry payloads encode
 * them (and write their blobs first); every other call is the inner store's, with the tokens of
 * its result resolved. Synchronous writes stay synchronous where the database keeps the bytes.
 */
import type {
  ApprovalInsert,
  BlobWrite,
  ChunksWrite,
  ClaimRequest,
  ListQuery,
  NewTask,
  StepRow,
  StepWrite,
  ScheduleDefinition,
  SignalWrite,
  Store,
  TransactionCheckpoint,
  TransitionWrite,
  WriteOp,
} from '../store.ts';
import type { Transaction } from '../store/transactions.ts';
import type { WakeEvent } from '../store/wake.ts';
import type { DebounceWrite } from '../store/keyed-starts.ts';
import { PayloadLayer, type PayloadLayerOptions } from './payload-store.ts';
import { InvalidArgumentError } from '../errors.ts';
import { isRef } from './token.ts';
import { sealedApprovalUpdate, sealedRecords } from './sealed-writes.ts';
import type { IdempotencyBackend } from '../store/idempotency.ts';

/** The payload layer behind a layered store, for the engine's collection job and the bench. */
export const LAYERS = new WeakMap<Store, PayloadLayer>();

export function withPayloads(inner: Store, options: PayloadLayerOptions): Store {
  const layer = new PayloadLayer(inner, options);
  let records: IdempotencyBackend | undefined;
  const overrides: Partial<Record<keyof Store, unknown>> = {
    ...startOverrides(layer, inner),
    ...writeOverrides(layer, inner, options),
    runInTransaction: transactions(layer, inner),
    updateApproval: sealedApprovalUpdate(layer, inner),
    idempotencyRecords: inner.idempotencyRecords ? () => (records ??= sealedRecords(layer, inner.idempotencyRecords!())) : undefined,
  };
  // One wrapper per method, made on first use: the hot path reads the same few methods per step.
  const wrapped = new Map<string | symbol, unknown>();
  const resolveRead = (x: unknown): unknown => layer.resolve(x);
  const proxy = new Proxy(inner, {
    get(target, prop, receiver) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop as keyof Store];
      const v: unknown = Reflect.get(target, prop, receiver === proxy ? target : receiver);
      if (typeof v !== 'function') return v;
      let w = wrapped.get(prop);
      if (w === undefined) {
        w = (...args: unknown[]) => {
          const r: unknown = (v as (...a: unknown[]) => unknown).apply(target, args);
          return r instanceof Promise ? r.then(resolveRead) : r;
        };
        wrapped.set(prop, w);
      }
      return w;
    },
  });
  LAYERS.set(proxy, layer);
  return proxy;
}

type Pending = ReturnType<PayloadLayer['newPending']>;

// The callbacks of a batch's `map` are functions of the module with the layer as `this`, not
// closures of each call: V8 drops a closure's optimised code once all its closures are gone, so
// per-call closures are compiled again after each quiet spell (docs/architecture.md, "Hot paths").
function newTaskOf(this: { layer: PayloadLayer; p: Pending }, t: NewTask): NewTask {
  return this.layer.newTask(this.p, t);
}

function opOf(this: { layer: PayloadLayer; p: Pending }, op: WriteOp): WriteOp {
  return this.layer.op(this.p, op);
}

/** The calls that create tasks: their inputs are encoded, held by the new task. */
function startOverrides(layer: PayloadLayer, s: Store): Partial<Record<keyof Store, unknown>> {
  /** One new task's input encoded and its blobs written, then `write` with it, its result resolved. */
  const one = async <R>(task: NewTask, write: (t: NewTask) => Promise<R>) => {
    const p = layer.newPending();
    const t = layer.newTask(p, task);
    await layer.flush(p);
    return layer.resolve(await write(t), p);
  };
  return {
    insertTask: (task: NewTask) => one(task, (t) => s.insertTask(t)),
    async insertTasks(tasks: readonly NewTask[], notify?: WakeEvent) {
      const p = layer.newPending();
      const ts = tasks.map(newTaskOf, { layer, p });
      await layer.flush(p);
      return layer.resolve(await s.insertTasks(ts, notify), p);
    },
    startSingleton: (task: NewTask, notify?: WakeEvent) => one(task, (t) => s.startSingleton(t, notify)),
    async startDebounced(task: NewTask, write: DebounceWrite, notify?: WakeEvent) {
      // The input may land on an existing task of another id: sealed in place, never a blob.
      const p = layer.newPending();
      const t = { ...task, input: layer.seal(p, task.input) as string | null };
      const w = { ...write, log: layer.fixLog(p, [write.log])[0] as DebounceWrite['log'] };
      return layer.resolve(await s.startDebounced(t, w, notify), p);
    },
    async forkTask(task: NewTask & { forkedFrom: string }, seqs: readonly number[]) {
      // Shared before (the copied rows must never be unheld) and again once the fork exists (a
      // collection between the two may drop holdings of a task it does not find yet).
      await s.shareBlobs(task.forkedFrom, task.id);
      const p = layer.newPending();
      const t = layer.newTask(p, task);
      await layer.flush(p);
      const row = await s.forkTask(t, seqs);
      await s.shareBlobs(task.forkedFrom, task.id);
      return layer.resolve(row, p);
    },
  };
}

/** The other writes that carry payloads, and the listing that cannot search sealed ones. */
function writeOverrides(layer: PayloadLayer, s: Store, options: PayloadLayerOptions): Partial<Record<keyof Store, unknown>> {
  return {
    async transition(w: TransitionWrite) {
      const p = layer.newPending();
      const t = layer.transition(p, w);
      await layer.flush(p);
      return layer.resolve(await s.transition(t), p);
    },
    async writeBatch(ops: readonly WriteOp[]) {
      const p = layer.newPending();
      const o = ops.map(opOf, { layer, p });
      await layer.flush(p);
      return layer.resolve(await s.writeBatch(o), p);
    },
    writeBatchNow: layer.syncWrites
      ? (ops: readonly WriteOp[]) => {
          const p = layer.newPending();
          const o = ops.map(opOf, { layer, p });
          layer.flushNow(p);
          return layer.resolveNow(s.writeBatchNow!(o), p);
        }
      : undefined,
    async insertSignal(signal: SignalWrite) {
      const p = layer.newPending();
      const w = { ...signal, payload: layer.encode(p, signal.payload, [signal.taskId]) as string | null };
      await layer.flush(p);
      return layer.resolve(await s.insertSignal(w), p);
    },
    async insertApproval(write: ApprovalInsert) {
      const p = layer.newPending();
      const approval = { ...write.approval, payload: layer.encode(p, write.approval.payload, [write.approval.taskId]) as string | null };
      const w = { ...write, approval, log: layer.fixLog(p, write.log) };
      await layer.flush(p);
      return layer.resolve(await s.insertApproval(w), p);
    },
    async appendChunks(write: ChunksWrite) {
      const p = layer.newPending();
      return s.appendChunks({ ...write, chunks: write.chunks.map((c) => ({ ...c, delta: layer.seal(p, c.delta) as string })) });
    },
    async listTasks(q: ListQuery) {
      // The database cannot look inside sealed errors and inputs: say so rather than find nothing.
      if (options.codec && (q.failedWith !== undefined || q.text !== undefined)) {
        throw new InvalidArgumentError(
          `list(): ${q.failedWith !== undefined ? 'failedWith' : 'text'} searches errors and inputs, which this engine encrypts (new Engine({ codec })); search by tags, status, workflow or time instead.`,
        );
      }
      return layer.resolve(await s.listTasks(q));
    },
    async claim(request: ClaimRequest) {
      // A completed step's recorded output stays a reference: the run's replay loads it when it gets there.
      const claimed = await s.claim(request);
      const later = new Map<StepRow, string>();
      for (const c of claimed) for (const row of c.steps) if (row.done !== null && isRef(row.output)) later.set(row, row.output);
      for (const row of later.keys()) row.output = null;
      await layer.resolve(claimed);
      for (const [row, token] of later) row.output = token;
      return claimed;
    },
    async resolvePayloads(texts: readonly string[]) {
      const loads = layer.replayLoads;
      loads.calls++;
      loads.values += texts.length;
      loads.most = Math.max(loads.most, texts.length);
      return layer.resolve([...texts], undefined, true);
    },
    async putSchedule(def: ScheduleDefinition, nextAt: number | null, at: number) {
      const p = layer.newPending();
      return layer.resolve(await s.putSchedule({ ...def, input: layer.seal(p, def.input) as string | null }, nextAt, at), p);
    },
  };
}

/**
 * A transactional step's checkpoint: its output encoded once the function has returned it, and its
 * blobs written in the step's own transaction (kept if and only if the checkpoint commits).
 */
function transactions(layer: PayloadLayer, s: Store): Store['runInTransaction'] {
  if (!s.runInTransaction) return undefined;
  return async <T>(fn: (tx: Transaction) => Promise<T>, checkpoint: (value: T) => TransactionCheckpoint | Promise<TransactionCheckpoint>) => {
    let blobs: BlobWrite[] = [];
    const r = await s.runInTransaction!(fn, async (value) => {
      const cp = await checkpoint(value);
      const p = layer.newPending();
      const write = layer.op(p, cp.write) as StepWrite;
      blobs = layer.blobWrites(p);
      return { write, blobs: [...cp.blobs, ...blobs] };
    });
    if (r.accepted) layer.held(blobs);
    return r;
  };
}
