/**
 * @module stepwise/server
 * The HTTP API, the dashboard, and the observers operators use (pino logs, Prometheus metrics,
 * OpenTelemetry spans). Uses only the public API of `stepwise-engine`.
 */
export { createServer } from './app.ts';
export type { ServerOptions, StepwiseServer } from './app.ts';
export { parseTokenList, readTokenFile, ROLES, can } from './auth.ts';
export type { Identity, Role, TokenEntry, Permission } from './auth.ts';
export { ServerMetrics } from './observers/metrics.ts';
export { createLogObserver } from './observers/logs.ts';
export { createTracingObserver } from './observers/tracing.ts';
export type { TracingOptions } from './observers/tracing.ts';
