/**
 * @module turns
 * @internal
 * Turns of the event loop shared by all runs in the process. A run hands one result to its
 * workflow code per turn (so that the code's continuations run in between, the same way in the
 * first run as in replay); the runs of all tasks take their turns together, in one macrotask, so
 * that the checkpoints their code requests next arrive together and share one database write.
 */
let queue: Array<() => void> = [];
let scheduled = false;

/** Runs `fn` in the next turn (after the current macrotask and its microtasks). */
export function nextTurn(fn: () => void): void {
  queue.push(fn);
  if (scheduled) return;
  scheduled = true;
  setImmediate(() => {
    scheduled = false;
    const due = queue;
    queue = [];
    for (const f of due) f();
  });
}
