/**
 * @module testing/check-drift
 * `checkDrift(engine, filter)`: `engine.drift(filter)` under the name the testing tools gave it
 * first: the tasks of a filter whose recorded model calls the current code would make with
 * another request, each with the step to re-run from.
 */
import type { Engine } from '../index.ts';
import type { DriftFilter, DriftReport } from '../replay/drift.ts';

export type { DriftReport, TaskDrift } from '../replay/drift.ts';

export async function checkDrift(engine: Engine, filter: DriftFilter = {}): Promise<DriftReport> {
  return engine.drift(filter);
}
