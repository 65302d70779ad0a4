/**
 * @module errors/child
 * Child tasks (`ctx.startChild`, `ctx.child`): a child that did not succeed, as its parent sees
 * it, and a tree grown deeper than the engine allows.
 */
import { ERROR_CODES } from './codes.ts';
import { StepwiseError } from './base.ts';

/**
 * What `ctx.child()` / `handle.result()` throw in the parent when the child task failed or was
 * cancelled: the child's id, workflow and status, and its error's code and message (`cause`: the
 * child's error as stored). Not retried by itself: catch it to go on without that child.
 */
export class ChildFailedError extends StepwiseError {
  /** The child task's id. */
  readonly childId: string;
  /** The child's workflow. */
  readonly childWorkflow: string;
  /** How the child ended. */
  readonly childStatus: 'failed' | 'cancelled';
  /** The code of the child's error (`TASK_CANCELLED` for a cancelled child), or null. */
  readonly childCode: string | null;
  /** The message of the child's error. */
  readonly childMessage: string;
  constructor(child: { id: string; workflow: string; status: 'failed' | 'cancelled'; code: string | null; message: string }, cause?: unknown) {
    super(
      ERROR_CODES.CHILD_FAILED,
      `Child task ${child.id} (workflow "${child.workflow}") ${child.status === 'cancelled' ? 'was cancelled' : 'failed'}${child.code ? ` [${child.code}]` : ''}: ${child.message}`,
      { cause, retryable: false },
    );
    this.name = 'ChildFailedError';
    this.childId = child.id;
    this.childWorkflow = child.workflow;
    this.childStatus = child.status;
    this.childCode = child.code;
    this.childMessage = child.message;
  }
}

/** A child would be deeper than `limits.childDepth` (default 16): its start fails the parent's call. */
export class ChildDepthExceededError extends StepwiseError {
  /** The task whose call would have started the child. */
  readonly parentId: string;
  /** The depth the child would have had. */
  readonly depth: number;
  /** `limits.childDepth`. */
  readonly limit: number;
  constructor(parentId: string, workflow: string, depth: number, limit: number) {
    super(
      ERROR_CODES.CHILD_DEPTH_EXCEEDED,
      `Task ${parentId} cannot start a child of workflow "${workflow}": the child would be at depth ${depth}, past the limit of ${limit} (limits.childDepth). A workflow that starts itself without end is the usual cause.`,
      { retryable: false },
    );
    this.name = 'ChildDepthExceededError';
    this.parentId = parentId;
    this.depth = depth;
    this.limit = limit;
  }
}
