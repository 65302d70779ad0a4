/**
 * @module api/child
 * The public types of child tasks: what `ctx.startChild` / `ctx.child` take and return (see
 * docs/child-tasks.md). The primitive itself is `primitives/child.ts`.
 */

/** Options of `ctx.startChild` / `ctx.child`. */
export interface ChildOptions {
  /**
   * The name of the parent's call that starts the child (its journal entry): the child's identity
   * derives from it and its occurrence, as a step's idempotency key does. @defaultValue `child:<workflow>`
   */
  name?: string;
  /**
   * What happens to this child if the parent ends (succeeds or fails) while the child is still
   * running: `'cancel'` cancels it (and its own children) and the parent ends once it has ended;
   * `'abandon'` leaves it running. A cancel of the parent always cancels its children. @defaultValue 'cancel'
   */
  onParentEnd?: 'cancel' | 'abandon';
}

/** A started child task: its id, and its output once it ends. */
export interface ChildHandle<O = unknown> {
  /** The child task's id (`engine.get(id)`). */
  readonly id: string;
  /** The child's workflow. */
  readonly workflow: string;
  /**
   * Waits (parked: no worker slot held) for the child to end: its output once it succeeds;
   * ChildFailedError (CHILD_FAILED: the child's id, status, code and message) if it failed or was
   * cancelled. Called again, it returns the same promise.
   */
  result(): Promise<O>;
}

/** Options of `ctx.children`: those of each child, and how many run at once. */
export interface ChildrenOptions extends ChildOptions {
  /**
   * How many of the children are started and not yet ended at once (across all workers): the next
   * starts when one ends. @defaultValue all of them
   */
  concurrency?: number;
}
