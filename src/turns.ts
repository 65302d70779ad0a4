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

/** Bumped when the event loop turns (by an immediate armed while a streak is going on). */
let turn = 0;
let bumpArmed = false;
let streakTurn = -1;
let streakStart = 0;
let streakCount = 0;

/**
 * Whether one more result may be handed over within the current macrotask (without waiting for a
 * turn). The budget is the process's, shared by all runs: at most `maxCount` hand-overs or `maxMs`
 * of real time per macrotask, then everyone waits for a turn, so timers (heartbeats, step timeouts)
 * and I/O (cancels, notifications) get in however quick the steps are.
 */
export function mayStayInTurn(maxCount: number, maxMs: number): boolean {
  if (!bumpArmed) {
    bumpArmed = true;
    setImmediate(() => {
      bumpArmed = false;
      turn++;
    });
  }
  const now = performance.now();
  if (streakTurn !== turn) {
    streakTurn = turn;
    streakStart = now;
    streakCount = 0;
  }
  if (streakCount >= maxCount || now - streakStart > maxMs) return false;
  streakCount++;
  return true;
}
