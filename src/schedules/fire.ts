/**
 * @module schedules/fire
 * Fires the ticks that are due. For each due schedule: skip the ticks missed beyond its catch-up
 * window, apply its overlap policy against the task of its last tick, start the tick's task under
 * the tick's idempotency key, then move the schedule's next tick with a compare-and-set. Processes
 * that race for one tick start the same task (the key) and only one of them moves the tick (the
 * compare-and-set); a process that dies between the two leaves the tick due, and whoever fires it
 * next finds the task already started. A tick once moved past is never fired again, whatever
 * retention has deleted since.
 */
import { FINISHED_STATUSES, type TaskStatus } from '../lifecycle.ts';
import { decodeJson } from '../serialize.ts';
import { tickKey } from '../schedule-key.ts';
import type { Clock } from '../clock.ts';
import type { ScheduleRow, Store } from '../store.ts';
import { cronTicks, type CronTicks } from './cron.ts';

/** What firing needs from the engine. */
export interface FireDeps {
  store(): Promise<Store>;
  readonly clock: Clock;
  /** Whether this engine serves the workflow (only such schedules are fired here). */
  serves(workflow: string): boolean;
  start(workflow: string, input: unknown, idempotencyKey: string): Promise<string>;
  status(taskId: string): Promise<TaskStatus | null>;
  cancel(taskId: string, reason: string): Promise<void>;
}

/** At most this many missed ticks are counted one by one before the rest are jumped over. */
const MAX_COUNTED_MISSES = 10_000;

/** Fires what is due now; returns how many tasks were started, and when the next tick is due. */
export async function fireDue(d: FireDeps, limit = 100): Promise<{ started: number; nextAt: number | null }> {
  const store = await d.store();
  const now = d.clock.now();
  let started = 0;
  for (const s of await store.dueSchedules(now, limit)) {
    if (!d.serves(s.workflow)) continue;
    started += await fireSchedule(d, store, s, now);
  }
  return { started, nextAt: await store.nextScheduleAt() };
}

async function running(d: FireDeps, taskId: string | null): Promise<boolean> {
  if (taskId === null) return false;
  const status = await d.status(taskId);
  return status !== null && !FINISHED_STATUSES.includes(status);
}

/** Handles one schedule's due tick (or its buffered one); returns how many tasks it started. */
async function fireSchedule(d: FireDeps, store: Store, s: ScheduleRow, now: number): Promise<number> {
  const ticks = cronTicks(s.cron, s.timezone, `schedule "${s.id}"`);
  const input = decodeJson(s.input);
  if (s.bufferedAt !== null && !(await running(d, s.lastTaskId))) {
    const id = await d.start(s.workflow, input, tickKey(s.id, s.bufferedAt));
    await store.advanceSchedule({ id: s.id, from: s.nextAt as number, nextAt: s.nextAt, lastTaskId: id, bufferedAt: null, at: now });
    return 1;
  }
  if (s.nextAt === null || s.nextAt > now) return 0;
  const { tick, missed } = firstInWindow(ticks, s.nextAt, now - s.catchupMs);
  if (tick === null || tick > now) {
    await store.advanceSchedule({ id: s.id, from: s.nextAt, nextAt: tick, skipped: missed, at: now });
    return 0;
  }
  const following = ticks.next(tick);
  const base = { id: s.id, from: s.nextAt, nextAt: following, lastAt: tick, at: now };
  if (s.overlap !== 'allow' && (await running(d, s.lastTaskId))) {
    if (s.overlap === 'skip') return (void (await store.advanceSchedule({ ...base, skipped: missed + 1 })), 0);
    if (s.overlap === 'buffer') {
      // One tick waits; a later one while it waits is skipped.
      const waiting = s.bufferedAt !== null;
      await store.advanceSchedule({ ...base, skipped: missed + (waiting ? 1 : 0), ...(waiting ? {} : { bufferedAt: tick }) });
      return 0;
    }
    await d.cancel(s.lastTaskId as string, `schedule "${s.id}": the tick of ${new Date(tick).toISOString()} replaces it (overlap: 'cancel')`);
  }
  const id = await d.start(s.workflow, input, tickKey(s.id, tick));
  await store.advanceSchedule({ ...base, lastTaskId: id, skipped: missed });
  return 1;
}

/** The first tick from `from` on that is not older than `oldest`, and how many were passed over. */
function firstInWindow(ticks: CronTicks, from: number, oldest: number): { tick: number | null; missed: number } {
  let tick: number | null = from;
  let missed = 0;
  while (tick !== null && tick < oldest) {
    if (++missed > MAX_COUNTED_MISSES) return { tick: ticks.next(oldest - 1), missed };
    tick = ticks.next(tick);
  }
  return { tick, missed };
}
