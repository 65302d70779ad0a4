/**
 * @module alerts/options
 * The engine's `alerts` option, checked (a typo is refused, never ignored) and with its defaults.
 */
import { toMs } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkOptionKeys } from '../option-keys.ts';
import type { AlertOptions } from './types.ts';

export interface ResolvedAlerts {
  failureRate: { windowMs: number; threshold: number; minFinished: number } | null;
  crashLoop: { reclaims: number } | null;
  workersGone: boolean;
  stuck: boolean;
  budget: { share: number } | null;
  everyMs: number;
  quietMs: number;
  /** How long raised alerts stay listed. */
  keepMs: number;
  webhook: { url: string; headers: Record<string, string>; timeoutMs: number } | null;
}

/** How long raised alerts stay listed unless `alerts.keep` says otherwise: 30 days. */
export const DEFAULT_ALERT_KEEP_MS = 30 * 24 * 3_600_000;

const KEYS = ['failureRate', 'crashLoop', 'workersGone', 'stuck', 'budget', 'every', 'quiet', 'keep', 'webhook'] as const;

export function resolveAlerts(o: AlertOptions | undefined): ResolvedAlerts | null {
  if (o === undefined) return null;
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('new Engine({ alerts }): alerts must be an object ({} for the defaults).');
  checkOptionKeys(o, KEYS, 'new Engine({ alerts })');
  const fr = o.failureRate === false ? null : (o.failureRate ?? {});
  if (fr) checkOptionKeys(fr, ['window', 'threshold', 'minFinished'], 'alerts.failureRate');
  const threshold = fr?.threshold ?? 0.5;
  if (fr && !(threshold > 0 && threshold <= 1)) throw new InvalidArgumentError(`alerts.failureRate.threshold must be a share in (0, 1], got ${String(fr.threshold)}.`);
  const minFinished = fr?.minFinished ?? 10;
  if (fr && (!Number.isInteger(minFinished) || minFinished < 1)) throw new InvalidArgumentError(`alerts.failureRate.minFinished must be a whole number ≥ 1, got ${String(fr.minFinished)}.`);
  const cl = o.crashLoop === false ? null : (o.crashLoop ?? {});
  if (cl) checkOptionKeys(cl, ['reclaims'], 'alerts.crashLoop');
  const reclaims = cl?.reclaims ?? 3;
  if (cl && (!Number.isInteger(reclaims) || reclaims < 1)) throw new InvalidArgumentError(`alerts.crashLoop.reclaims must be a whole number ≥ 1, got ${String(cl.reclaims)}.`);
  const bu = o.budget === false ? null : (o.budget ?? {});
  if (bu) checkOptionKeys(bu, ['share'], 'alerts.budget');
  const share = bu?.share ?? 0.8;
  if (bu && !(typeof share === 'number' && share > 0 && share <= 1)) throw new InvalidArgumentError(`alerts.budget.share must be a share in (0, 1], got ${String(bu.share)}.`);
  let webhook: ResolvedAlerts['webhook'] = null;
  if (o.webhook !== undefined) {
    checkOptionKeys(o.webhook, ['url', 'headers', 'timeout'], 'alerts.webhook');
    if (typeof o.webhook.url !== 'string' || !/^https?:\/\//.test(o.webhook.url))
      throw new InvalidArgumentError(`alerts.webhook.url must be an http(s) URL, got ${JSON.stringify(o.webhook.url)}.`);
    webhook = { url: o.webhook.url, headers: { ...o.webhook.headers }, timeoutMs: o.webhook.timeout === undefined ? 5000 : toMs(o.webhook.timeout, 'alerts.webhook.timeout') };
  }
  return {
    failureRate: fr ? { windowMs: fr.window === undefined ? 15 * 60_000 : toMs(fr.window, 'alerts.failureRate.window'), threshold, minFinished } : null,
    crashLoop: cl ? { reclaims } : null,
    workersGone: o.workersGone ?? true,
    stuck: o.stuck ?? true,
    budget: bu ? { share } : null,
    everyMs: o.every === undefined ? 60_000 : toMs(o.every, 'alerts.every'),
    quietMs: o.quiet === undefined ? 15 * 60_000 : toMs(o.quiet, 'alerts.quiet'),
    keepMs: o.keep === undefined ? DEFAULT_ALERT_KEEP_MS : toMs(o.keep, 'alerts.keep'),
    webhook,
  };
}
