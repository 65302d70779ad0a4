/**
 * @module events
 * The payloads of a worker's news, by `noun:verb` name: what `worker.on(name, fn)` hands to `fn`.
 * They travel as `WorkerNews` (news.ts) on the engine's one news bus, with the worker and
 * the run they came from; observers are fed from the same news.
 */
import type { Alert } from './alerts/types.ts';
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
  /**
   * A replayed model call (`stepwise-engine/ai`) whose request the code now makes differently from
   * the recorded one (prompt, model, tools or settings changed): the recorded answer is kept.
   */
  'model:drift': { taskId: string; step: string; model: string; recordedFingerprint: string; fingerprint: string };
  /**
   * A model attempt of a task with a budget was counted (`stepwise-engine/ai`): what the task has
   * spent and its limits, for the budget alert (`alerts.budget`).
   */
  'budget:spent': { taskId: string; step: string; spent: { tokens: number; usd: number }; budget: { tokens?: number; usd?: number } };
  /** An alert the worker raised (`new Engine({ alerts })`): once per subject and quiet period across the workers. */
  'alert:raised': Alert;
}

export type WorkerEventName = keyof WorkerEvents;
/** How a run reports its news (the worker adds the run it came from). */
export type Emit = <K extends WorkerEventName>(name: K, payload: WorkerEvents[K]) => void;
