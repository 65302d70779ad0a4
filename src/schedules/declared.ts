/**
 * @module schedules/declared
 * Schedules declared with workflows (`workflow(name, fn, { schedule })`), kept in step with the
 * code by the workers that serve them: at a worker's first scan, a declared schedule is created or
 * its definition updated, and a schedule once declared by a served workflow that no longer
 * declares it is deleted. A schedule created through the API under the same id is left alone (and
 * reported).
 */
import { ConflictError } from '../errors.ts';
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import type { Workflow } from '../workflow.ts';
import { declaredSchedule, firstTick, sameDefinition } from './definition.ts';

export async function reconcileDeclared(store: Store, clock: Clock, workflows: ReadonlyMap<string, Workflow>): Promise<void> {
  const declared = new Map<string, ReturnType<typeof declaredSchedule>>();
  for (const wf of workflows.values()) {
    if (wf.options.schedule) {
      const def = declaredSchedule(wf.name, wf.options.schedule);
      declared.set(def.id, def);
    }
  }
  const clashes: string[] = [];
  for (const def of declared.values()) {
    const existing = await store.getSchedule(def.id);
    const now = clock.now();
    if (existing?.source === 'api') clashes.push(def.id);
    else if (!existing || !sameDefinition(def, existing)) {
      await store.putSchedule(def, firstTick(def, now), now);
      if (!existing && def.paused) await store.setSchedulePaused(def.id, true, null, now);
    }
  }
  for (const name of workflows.keys()) {
    for (const row of await store.listSchedules({ limit: 1000, workflow: name })) {
      if (row.source === 'workflow' && !declared.has(row.id)) await store.deleteSchedule(row.id);
    }
  }
  if (clashes.length) {
    throw new ConflictError(
      `The schedule${clashes.length > 1 ? 's' : ''} ${clashes.map((c) => `"${c}"`).join(', ')} declared with a workflow ${clashes.length > 1 ? 'have ids' : 'has an id'} ` +
        'that a schedule created through engine.schedules.create already uses; that one is kept. Give the declared schedule another id (schedule.id), or delete the other.',
    );
  }
}
