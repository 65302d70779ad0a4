/**
 * @module dwell/types
 * Dwell timeouts (a workflow's `dwell` option): how long its tasks may stay `waiting` or `paused`,
 * or `running` without progress, and what happens then. Checked and turned into milliseconds here; enforced by the scanner.
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { DwellOutcome } from '../task-events/dwell.ts';

export { toDwellEvent, type DwellAlert, type DwellEvent, type DwellOutcome } from '../task-events/dwell.ts';

export interface DwellBound {
  /**
   * How long the task may stay in the status, from when it entered it; for `running`, from its last
   * sign of progress (the run started, a step finished, or a progress report).
   */
  after: Duration;
  /** `fail` (error DwellTimeoutError, retryable by a user), `cancel`, or `alert` (a log entry only). */
  then: DwellOutcome;
}

export interface DwellOptions {
  waiting?: DwellBound;
  paused?: DwellBound;
  /**
   * Running with no step finished and no progress reported for longer than `after` (a stalled run).
   * `fail` fails the task (its run is fenced off), `cancel` cancels it like a user would (the run is
   * aborted), `alert` records the stall once per stall.
   */
  running?: DwellBound;
}

export const DWELL_STATUSES = ['waiting', 'paused', 'running'] as const;
export type DwellStatus = (typeof DWELL_STATUSES)[number];

/** Checks a workflow's `dwell` option (at definition time). */
export function checkDwell(workflow: string, dwell: unknown): void {
  if (typeof dwell !== 'object' || dwell === null) throw new InvalidArgumentError(`workflow("${workflow}"): dwell must be { waiting?, paused?, running? }.`);
  for (const [key, bound] of Object.entries(dwell)) {
    if (!(DWELL_STATUSES as readonly string[]).includes(key)) throw new InvalidArgumentError(`workflow("${workflow}"): dwell.${key} is not a bound (use waiting, paused or running).`);
    const b = bound as Partial<DwellBound> | null;
    if (typeof b !== 'object' || b === null || b.after === undefined)
      throw new InvalidArgumentError(`workflow("${workflow}"): dwell.${key} must be { after: duration, then: 'fail' | 'cancel' | 'alert' }.`);
    toMs(b.after, `dwell.${key}.after of workflow "${workflow}"`);
    if (!['fail', 'cancel', 'alert'].includes(b.then as string))
      throw new InvalidArgumentError(`workflow("${workflow}"): dwell.${key}.then must be 'fail', 'cancel' or 'alert', got ${JSON.stringify(b.then)}.`);
  }
}
