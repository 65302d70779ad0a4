/**
 * @module commands
 * The command modules the Engine façade delegates to, one import for it.
 */
export { actorOf, type CommandContext } from './context.ts';
export { EngineCore } from './core.ts';
export * as decisions from './decisions.ts';
export { eventLog } from './events.ts';
export { explainTask } from './explain.ts';
export { cancelTask, moveTask } from './lifecycle.ts';
export { countTasks, getTask, listTasks, setTaskTags } from './queries.ts';
export { awaitResult } from './result.ts';
export { retryTask } from './retry.ts';
export { sendSignal } from './signal.ts';
export { startAll, startOne } from './start.ts';
export { startChildTask, childrenOf, parentOf, moveSubtree, wantsSubtree } from './children.ts';
export { forkTask } from './fork.ts';
export { listAlerts } from './alerts.ts';
export { bulk, BULK_ACTIONS, type BulkAction, type BulkOptions, type BulkResult } from './bulk.ts';
export { taskDrift, filterDrift, resolveFromStep, type DriftFilter, type DriftReport, type TaskDrift } from '../replay/drift.ts';
