/**
 * @module commands
 * The command modules the Engine façade delegates to, one import for it.
 */
export { actorOf, type CommandContext } from './context.ts';
export * as decisions from './decisions.ts';
export { eventLog } from './events.ts';
export { explainTask } from './explain.ts';
export { cancelTask, moveTask } from './lifecycle.ts';
export { deliverNews } from './news.ts';
export { closeEngineStore, openEngineStore, type OpenStore } from './open.ts';
export { probeStore } from './probe.ts';
export { countTasks, getTask, listTasks } from './queries.ts';
export { awaitResult } from './result.ts';
export { retryTask } from './retry.ts';
export { SettledChannel } from './settled.ts';
export { engineIdempotency, engineLimits, engineObservers } from './setup.ts';
export { sendSignal } from './signal.ts';
export { announceCreated, startAll, startOne, type StartDeps } from './start.ts';
export { newWorker } from './workers.ts';
