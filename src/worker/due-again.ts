/**
 * @module worker/due-again
 * Internal: not part of the public API (the package exports only its index modules).
 * Tasks this worker's own writes left due at once: a run that parked while its signal came (the
 * park found the signal and made the task due), or one handed back to be run again. The worker
 * claims them straight after; on PostgreSQL a claim skips rows another transaction holds for the
 * moment (a heartbeat, a writer), and nothing would announce them again. So until a claim takes
 * them, or a few short looks have passed (another worker may have taken them), the worker looks
 * again soon rather than at its next poll.
 */
import type { WriteResult } from '../store.ts';

/** The delays of the looks again: each doubles the last. */
const FIRST_LOOK_MS = 10;
const LOOKS = 4;

export class DueAgain {
  readonly #ids = new Set<string>();
  #looks = 0;

  /** Notes the rows among `results` that are due by `now` and free to claim, of workflows `serves`. */
  note(results: readonly WriteResult[], now: number, serves: (workflow: string) => boolean): void {
    for (const r of results) {
      if (typeof r !== 'object' || r === null) continue;
      if ((r.status === 'waiting' || r.status === 'pending') && r.leaseOwner === null && r.runAt !== null && r.runAt <= now && serves(r.workflow)) {
        this.#ids.add(r.id);
        this.#looks = 0;
      }
    }
  }

  /** A claim took these tasks. */
  taken(ids: readonly string[]): void {
    for (const id of ids) this.#ids.delete(id);
  }

  /** How soon to look again (null: no sooner than the poll); each call counts one look. */
  lookAgainMs(): number | null {
    if (!this.#ids.size) return null;
    if (this.#looks >= LOOKS) {
      this.#ids.clear();
      return null;
    }
    return FIRST_LOOK_MS * 2 ** this.#looks++;
  }
}
