/**
 * @module commands/events
 * `engine.events`: the event log as it grows, one task's or every task's (the reading itself is
 * in event-stream.ts). This module checks the options and opens the store lazily, when the loop
 * starts.
 */
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import { toMs } from '../duration.ts';
import { InvalidArgumentError, TaskNotFoundError } from '../errors.ts';
import type { NewsBus } from '../news.ts';
import type { Store } from '../store.ts';
import type { StreamEvent } from '../stream-frames.ts';
import type { TaskEvent } from '../task-events.ts';
import { allEvents, checkStreamOptions, taskEvents, type EventsOptions } from '../event-stream.ts';

/** Refuses options `engine.events` cannot follow. */
const EVENTS_OPTIONS = optionNames<EventsOptions>()('taskId', 'after', 'follow', 'signal', 'pollMs', 'streams', 'streamAfter');

function checkEventsOptions(options: EventsOptions): void {
  checkOptionKeys(options, EVENTS_OPTIONS, 'engine.events()');
  checkStreamOptions(options);
  if (options.taskId !== undefined && (typeof options.taskId !== 'string' || !options.taskId)) throw new InvalidArgumentError('events(): taskId must be a task id.');
  if (options.taskId !== undefined && options.after !== undefined && (typeof options.after !== 'number' || !Number.isInteger(options.after) || options.after < 0)) {
    throw new InvalidArgumentError('events({ taskId, after }): after is the last seq seen, a whole number ≥ 0.');
  }
  if (options.taskId === undefined && options.after !== undefined && typeof options.after !== 'string') {
    throw new InvalidArgumentError('events({ after }) across tasks takes the cursor of an earlier event (a string), or "now".');
  }
  if (options.pollMs !== undefined) toMs(options.pollMs, 'pollMs');
}

/** The log as an async iterable; `open` gives the store (and listens for ends, so a reader elsewhere hears of them at once). */
export function eventLog(open: () => Promise<Store>, bus: NewsBus, options: EventsOptions): AsyncIterable<(TaskEvent & { cursor?: string }) | StreamEvent> {
  checkEventsOptions(options);
  return {
    [Symbol.asyncIterator]: async function* () {
      const store = await open();
      if (options.taskId !== undefined) {
        if (!(await store.getTask(options.taskId))) throw new TaskNotFoundError(options.taskId);
        yield* taskEvents(store, bus, options.taskId, options);
      } else {
        yield* allEvents(store, bus, options);
      }
    },
  };
}
