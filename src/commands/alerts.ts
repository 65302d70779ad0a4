/**
 * @module commands/alerts
 * Internal: not part of the public API.
 * `engine.alerts(query)`: the alerts workers raised, newest first, from the store.
 */
import { ALERT_KINDS, type AlertInfo, type AlertKind, type AlertsQuery } from '../alerts/types.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import type { AlertRow } from '../store.ts';
import type { CommandContext } from './context.ts';

const QUERY_KEYS = optionNames<AlertsQuery>()('kind', 'workflow', 'taskId', 'before', 'limit');

export async function listAlerts(ctx: CommandContext, query: AlertsQuery): Promise<AlertInfo[]> {
  if (typeof query !== 'object' || query === null) throw new InvalidArgumentError('engine.alerts(query): the query must be an object.');
  checkOptionKeys(query, QUERY_KEYS, 'engine.alerts()');
  const kinds = query.kind === undefined ? undefined : typeof query.kind === 'string' ? [query.kind] : query.kind;
  if (kinds !== undefined && (!Array.isArray(kinds) || !kinds.length))
    throw new InvalidArgumentError(`engine.alerts(): kind is a kind or a non-empty list of kinds (${ALERT_KINDS.join(', ')}).`);
  for (const k of kinds ?? []) {
    if (!ALERT_KINDS.includes(k)) throw new InvalidArgumentError(`engine.alerts(): unknown alert kind ${JSON.stringify(k)}; the kinds are ${ALERT_KINDS.join(', ')}.`);
  }
  for (const key of ['workflow', 'taskId', 'before'] as const) {
    if (query[key] !== undefined && (typeof query[key] !== 'string' || !query[key])) throw new InvalidArgumentError(`engine.alerts(): ${key} must be a non-empty string.`);
  }
  const limit = query.limit ?? 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`engine.alerts(): limit must be a whole number from 1 to 1000, got ${String(query.limit)}.`);
  const store = await ctx.open();
  const rows = await store.listAlerts({
    limit,
    ...(kinds ? { kinds } : {}),
    ...(query.workflow !== undefined ? { workflow: query.workflow } : {}),
    ...(query.taskId !== undefined ? { taskId: query.taskId } : {}),
    ...(query.before !== undefined ? { before: query.before } : {}),
  });
  return rows.map(toAlertInfo);
}

function toAlertInfo(r: AlertRow): AlertInfo {
  return {
    id: r.id,
    kind: r.kind as AlertKind,
    subject: r.subject,
    workflow: r.workflow,
    taskId: r.taskId,
    message: r.message,
    at: r.raisedAt,
    data: JSON.parse(r.data) as Record<string, unknown>,
    raisedBy: r.raisedBy,
  };
}
