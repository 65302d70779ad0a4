/**
 * @module schedules/schedules
 * `engine.schedules`: create, list, get, pause, resume, delete and trigger schedules. Workers fire
 * their ticks (see fire.ts); these commands only change the rows.
 */
import { SCHEDULE_LIST_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { ConflictError, InvalidArgumentError, ScheduleNotFoundError } from '../errors.ts';
import { shortId } from '../ids.ts';
import { tickKey } from '../schedule-key.ts';
import type { Clock } from '../clock.ts';
import type { Store } from '../store.ts';
import type { ScheduleInfo, ScheduleOptions } from '../api/schedules.ts';
import { firstTick, sameDefinition, scheduleDefinition, scheduleInfo } from './definition.ts';
import { decodeJson } from '../serialize.ts';

export interface ScheduleDeps {
  store(): Promise<Store>;
  readonly clock: Clock;
  start(workflow: string, input: unknown, idempotencyKey: string): Promise<string>;
}

export class Schedules {
  readonly #d: ScheduleDeps;

  /** @internal */
  constructor(deps: ScheduleDeps) {
    this.#d = deps;
  }

  /**
   * Creates a schedule. Creating one that exists with the same definition changes nothing
   * (`created: false`); with another definition it is CONFLICT: {@link Schedules.update} replaces it.
   */
  async create(options: ScheduleOptions): Promise<ScheduleInfo & { created: boolean }> {
    const def = scheduleDefinition(options, 'api');
    const store = await this.#d.store();
    const existing = await store.getSchedule(def.id);
    if (existing) {
      if (!sameDefinition(def, existing)) {
        throw new ConflictError(`Schedule "${def.id}" exists with another definition (workflow ${existing.workflow}, cron "${existing.cron}"): use engine.schedules.update to change it.`, {
          recorded: scheduleInfo(existing),
        });
      }
      return { ...scheduleInfo(existing), created: false };
    }
    const now = this.#d.clock.now();
    let { row } = await store.putSchedule(def, firstTick(def, now), now);
    if (options.paused) row = (await store.setSchedulePaused(def.id, true, null, now)) ?? row;
    return { ...scheduleInfo(row), created: true };
  }

  /** Replaces a schedule's definition (its next tick is computed again from now; its history is kept). */
  async update(options: ScheduleOptions): Promise<ScheduleInfo> {
    const def = scheduleDefinition(options, 'api', 'engine.schedules.update');
    const store = await this.#d.store();
    if (!(await store.getSchedule(def.id))) throw new ScheduleNotFoundError(def.id);
    const now = this.#d.clock.now();
    return scheduleInfo((await store.putSchedule(def, firstTick(def, now), now)).row);
  }

  async get(id: string): Promise<ScheduleInfo> {
    const row = await (await this.#d.store()).getSchedule(checkId(id));
    if (!row) throw new ScheduleNotFoundError(id);
    return scheduleInfo(row);
  }

  /** Schedules in id order (`after`: the last id of the previous page). */
  async list(options: { workflow?: string; after?: string; limit?: number } = {}): Promise<ScheduleInfo[]> {
    checkOptionKeys(options, SCHEDULE_LIST_OPTIONS, 'engine.schedules.list()');
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`engine.schedules.list: limit must be an integer from 1 to 1000, got ${String(limit)}.`);
    const rows = await (await this.#d.store()).listSchedules({ limit, ...(options.after ? { after: options.after } : {}), ...(options.workflow ? { workflow: options.workflow } : {}) });
    return rows.map(scheduleInfo);
  }

  /** Stops firing ticks until resumed; ticks that fall due meanwhile are not fired later. */
  async pause(id: string): Promise<ScheduleInfo> {
    const row = await (await this.#d.store()).setSchedulePaused(checkId(id), true, null, this.#d.clock.now());
    if (!row) throw new ScheduleNotFoundError(id);
    return scheduleInfo(row);
  }

  /** Fires ticks again, from the next one after now. */
  async resume(id: string): Promise<ScheduleInfo> {
    const store = await this.#d.store();
    const existing = await store.getSchedule(checkId(id));
    if (!existing) throw new ScheduleNotFoundError(id);
    const now = this.#d.clock.now();
    const row = await store.setSchedulePaused(id, false, firstTick(existing, now), now);
    if (!row) throw new ScheduleNotFoundError(id);
    return scheduleInfo(row);
  }

  /** Deletes a schedule (the tasks it started stay). */
  async delete(id: string): Promise<{ deleted: boolean }> {
    return { deleted: await (await this.#d.store()).deleteSchedule(checkId(id)) };
  }

  /** Starts a task of the schedule now, outside its ticks (its `ctx.scheduledAt` is now). Returns the task's id. */
  async trigger(id: string): Promise<{ taskId: string }> {
    const row = await (await this.#d.store()).getSchedule(checkId(id));
    if (!row) throw new ScheduleNotFoundError(id);
    const taskId = await this.#d.start(row.workflow, decodeJson(row.input), tickKey(row.id, this.#d.clock.now(), shortId()));
    return { taskId };
  }
}

function checkId(id: unknown): string {
  if (typeof id !== 'string' || !id) throw new InvalidArgumentError('A schedule id is required.');
  return id;
}
