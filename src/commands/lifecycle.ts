/**
 * @module commands/lifecycle
 * The user commands that only move a task along the lifecycle table: cancel (with its reason),
 * pause and resume. Retry, which also rewrites the journal, is in retry.ts.
 */
import { CANCEL_OPTIONS, MOVE_OPTIONS, checkOptionKeys } from '../option-keys.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { LifecycleEvent } from '../lifecycle.ts';
import type { TaskRow } from '../store.ts';
import { checkText } from '../text-rules.ts';
import { runCommand, type CommandContext } from './context.ts';
import type { CommandOptions } from './options.ts';

export async function cancelTask(ctx: CommandContext, id: string, options: CommandOptions & { reason?: string }): Promise<TaskRow> {
  checkOptionKeys(options, CANCEL_OPTIONS, 'engine.cancel()');
  const reason = options.reason ?? null;
  if (reason !== null && (typeof reason !== 'string' || reason.length > 1000)) {
    throw new InvalidArgumentError('A cancel reason must be a string of at most 1000 characters.');
  }
  if (reason !== null) checkText(reason, 'The cancel reason');
  return runCommand(ctx, id, 'cancel', options.by, () => ({ set: { cancelReason: reason }, detail: { reason } }), reason);
}

/** Pause or resume: the transition alone. */
export function moveTask(ctx: CommandContext, id: string, event: Extract<LifecycleEvent, 'pause' | 'resume'>, options: CommandOptions): Promise<TaskRow> {
  try {
    checkOptionKeys(options, MOVE_OPTIONS, `engine.${event}()`);
  } catch (e) {
    return Promise.reject(e);
  }
  return runCommand(ctx, id, event, options.by, () => ({}));
}
