/**
 * @module fault-points
 * Internal: not part of the public API.
 * Named points where a crash test can have this process killed: with `STEPWISE_TEST_KILL_AT=<name>`
 * in its environment, the process SIGKILLs itself when it reaches that point (as DBOS's debug points
 * and pg-boss's `__test__throw_worker` do). Durability claims are proven by killing real processes
 * exactly between two writes, which no timing can hit reliably. Read once: costs a comparison.
 *
 * Points: `transaction:begun` (the database transaction of `ctx.transaction` is open, the user's
 * function has not run), `transaction:written` (the user's function returned: its writes are in the
 * open transaction, the checkpoint is not), `transaction:checkpointed` (the checkpoint is written in
 * the same transaction, not committed), `transaction:committed` (committed, not handed to the code),
 * `cleanup:done` (the cleanup after a cancel or a failure has run and its rows are durable; the
 * run's last transition is not written), `child:created` (`ctx.startChild` created the child task;
the parent's checkpoint of that call is not written), `retention:deleted` (a deletion of tasks committed, with
 * its deletion records; observers not yet told), `payloads:bytes-stored` (a blob's bytes are in an
 * external backend, its row is not written), `payloads:blobs-written` (a write's blob rows and holdings
 * are committed, the write that refers to them is not).
 */
const KILL_AT = process.env.STEPWISE_TEST_KILL_AT;

export function faultPoint(name: string): void {
  if (KILL_AT !== undefined && KILL_AT === name) process.kill(process.pid, 'SIGKILL');
}
