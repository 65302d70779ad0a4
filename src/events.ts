/**
 * @module events
 * The worker's events, in one typed map with `noun:verb` names. Subscribe with `worker.on(name, fn)`.
 */
import { EventEmitter } from 'node:events';
import type { ApprovalNotice } from './approvals/types.ts';
import type { TaskStatus } from './lifecycle.ts';

export interface WorkerEvents {
  'worker:started': { workerId: string; workflows: string[] };
  'worker:stopping': { workerId: string; inFlight: number };
  'worker:stopped': { workerId: string };
  'run:claimed': { taskId: string; workflow: string; epoch: number; reclaimed: boolean };
  'run:finished': { taskId: string; workflow: string; status: TaskStatus | 'lease-lost'; durationMs: number };
  /** `idempotencyKey`: the key the attempt received (its business key for a step with `key`). */
  'step:started': { taskId: string; step: string; idempotencyKey: string; attempt: number };
  'step:completed': { taskId: string; step: string; idempotencyKey: string; attempt: number; durationMs: number };
  'step:retrying': { taskId: string; step: string; idempotencyKey: string; attempt: number; delayMs: number; error: Error; parked: boolean };
  'step:failed': { taskId: string; step: string; idempotencyKey: string; attempt: number; error: Error };
  'lease:lost': { taskId: string; epoch: number };
  /** Something went wrong in the worker itself (a claim or heartbeat failed); it keeps going. */
  'worker:error': { error: Error; during: string };
  /** An approval a run asked for was requested, reminded, escalated or decided by its timeout policy. */
  'approval:notice': ApprovalNotice;
}

export type WorkerEventName = keyof WorkerEvents;
export type Emit = <K extends WorkerEventName>(name: K, payload: WorkerEvents[K]) => void;

/** A typed EventEmitter. */
export class TypedEmitter<Events extends object> {
  readonly #emitter = new EventEmitter();
  /** @param maxListeners per event before Node warns of a leak; 0: no limit. */
  constructor(maxListeners = 100) {
    this.#emitter.setMaxListeners(maxListeners);
  }
  on<K extends keyof Events & string>(name: K, listener: (payload: Events[K]) => void): () => void {
    this.#emitter.on(name, listener);
    return () => this.#emitter.off(name, listener);
  }
  off<K extends keyof Events & string>(name: K, listener: (payload: Events[K]) => void): void {
    this.#emitter.off(name, listener);
  }
  /** Whether anyone listens (so that a hot path builds no payload nobody reads). */
  hears(name: keyof Events & string): boolean {
    return this.#emitter.listenerCount(name) > 0;
  }
  /**
   * Calls each listener; a listener that throws does not reach the caller (the engine's own work
   * must not fail because of an observer) and is reported as a process warning.
   */
  emit<K extends keyof Events & string>(name: K, payload: Events[K]): void {
    if (this.#emitter.listenerCount(name) === 0) return;
    for (const listener of this.#emitter.listeners(name) as Array<(p: Events[K]) => void>) {
      try {
        listener(payload);
      } catch (e) {
        process.emitWarning(`A "${name}" listener threw: ${e instanceof Error ? e.message : String(e)}`, { code: 'STEPWISE_LISTENER' });
      }
    }
  }
}
