/**
 * @module alerts/types
 * What the engine alerts operators about (`new Engine({ alerts })`), and the options that tune it.
 */
import type { Duration } from '../duration.ts';

export type AlertKind = 'failure-rate' | 'crash-loop' | 'workers-gone' | 'stuck' | 'budget';

/** Every alert kind once: a record over AlertKind, so a new kind fails the typecheck until listed. */
const KIND_SET: Record<AlertKind, true> = { 'failure-rate': true, 'crash-loop': true, 'workers-gone': true, stuck: true, budget: true };

/** Every alert kind, in the order the docs list them. */
export const ALERT_KINDS = Object.freeze(Object.keys(KIND_SET)) as readonly [AlertKind, ...AlertKind[]];

/** One alert: raised at most once per subject and quiet period, across every worker of the store. */
export interface Alert {
  kind: AlertKind;
  /** What it is about: `workflow:<name>` or `task:<id>`; the unit of the quiet period. */
  subject: string;
  workflow: string | null;
  taskId: string | null;
  /** One sentence a person can act on. */
  message: string;
  /** When it was raised (ms, the engine's clock). */
  at: number;
  /** The figures behind it (rates, counts, epochs). */
  data: Record<string, unknown>;
}

/** A raised alert as listed (`engine.alerts()`): the alert, with its id and the worker that raised it. */
export interface AlertInfo extends Alert {
  id: string;
  raisedBy: string;
}

/** Which raised alerts to list, newest first. */
export interface AlertsQuery {
  kind?: AlertKind | readonly AlertKind[];
  workflow?: string;
  taskId?: string;
  /** Paging: alerts raised before this one (an id from the previous page). */
  before?: string;
  /** @defaultValue 100 (at most 1000) */
  limit?: number;
}

export interface AlertOptions {
  /**
   * A workflow whose share of failed tasks among those that finished in the last `window` reaches
   * `threshold` (with at least `minFinished` finished), or `false`.
   * @defaultValue `{ window: '15m', threshold: 0.5, minFinished: 10 }`
   */
  failureRate?: { window?: Duration; threshold?: number; minFinished?: number } | false;
  /** A task reclaimed after its worker died this many times (its epoch past it), or `false`. @defaultValue `{ reclaims: 3 }` */
  crashLoop?: { reclaims?: number } | false;
  /** A workflow with due tasks that no live worker serves. @defaultValue true */
  workersGone?: boolean;
  /** A task past a `dwell` bound whose outcome is `alert` (the workflow's option). @defaultValue true */
  stuck?: boolean;
  /**
   * A task with a model budget that has spent `share` of it or more (of its tokens or its cost,
   * whichever is further along), or `false`. @defaultValue `{ share: 0.8 }`
   */
  budget?: { share?: number } | false;
  /** How often a worker looks (failure rates, workers gone). @defaultValue '1m' */
  every?: Duration;
  /** The same subject alerts at most once per this period. @defaultValue '15m' */
  quiet?: Duration;
  /** How long raised alerts stay listed (`engine.alerts()`, the dashboard). @defaultValue '30d' */
  keep?: Duration;
  /** Each alert is also POSTed here as JSON (`{ alert }`), with these headers, within `timeout` (default 5 s). */
  webhook?: { url: string; headers?: Record<string, string>; timeout?: Duration };
}
