/**
 * @module run/turns
 * Internal: not part of the public API (the package exports only its index modules).
 * Turns, shared by all runs in the process: results are handed to workflow code one per turn
 * (see `replay.ts`), and a turn comes once every continuation of the code pending has run. The
 * runs of all tasks take their turns together, so that the checkpoints their code requests next
 * arrive together and share one database write.
 */

/**
 * Turns and results handed over at once taken within one macrotask, by all runs of the process
 * together, and the longest such a macrotask may last: then everyone waits for the event loop's
 * next turn, so heartbeats, cancels and other tasks get in every few milliseconds however quick
 * the steps are.
 */
const AT_ONCE_MAX = 1024;
const AT_ONCE_MS = 4;

let queue: Array<() => void> = [];
let turnScheduled = false;

function takeTurn(): void {
  turnScheduled = false;
  const due = queue;
  queue = [];
  for (const f of due) f();
}

/**
 * Runs `fn` in the next turn: once every continuation of the code now pending has run. Within
 * the budget of the current macrotask (see {@link mayStayInTurn}) that is as soon as the
 * microtask queue has drained, twice over with the `process.nextTick` callbacks queued meanwhile
 * (a continuation may pass through one); past the budget, after the event loop's next turn.
 */
export function nextTurn(fn: () => void): void {
  queue.push(fn);
  if (turnScheduled) return;
  turnScheduled = true;
  if (mayStayInTurn()) afterContinuations(takeTurn);
  else setImmediate(takeTurn);
}

/**
 * Calls `fn` after the microtasks pending now and those they queue: a callback of
 * `process.nextTick` queued from a microtask runs only once the microtask queue is empty. The
 * second round lets a continuation that went through a tick callback finish first too.
 */
function afterContinuations(fn: () => void): void {
  queueMicrotask(() => process.nextTick(() => queueMicrotask(() => process.nextTick(fn))));
}

/** Bumped when the event loop turns (by an immediate armed while a streak is going on). */
let turn = 0;
let bumpArmed = false;
let streakTurn = -1;
let streakStart = 0;
let streakCount = 0;

/**
 * Whether one more turn, or result handed over at once, may be taken within the current macrotask:
 * at most AT_ONCE_MAX of them or AT_ONCE_MS of real time per macrotask, by all runs.
 */
export function mayStayInTurn(): boolean {
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
  if (streakCount >= AT_ONCE_MAX || now - streakStart > AT_ONCE_MS) return false;
  streakCount++;
  return true;
}
