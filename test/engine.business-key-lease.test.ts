// A step with a business key holds its idempotency record under a lease it renews while it runs.
// If another owner takes the record over, the step's own signal fires with a reason saying the
// lease was lost: the operation is the other owner's now.
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import pg from 'pg';
import { isStepwiseError, workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { PG_URL } from './support/postgres.ts';
import { eventually, gate, makeEngine, startWorker, tempDbUrl } from './support/engine.ts';

/** Another owner takes the record of `key` over (as after this owner's lease ran out). */
async function takeOver(url: string, key: string, owner: string): Promise<number> {
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.pragma('busy_timeout = 5000');
      return db.prepare('UPDATE stepwise_idempotency SET owner = ? WHERE key = ?').run(owner, key).changes;
    } finally {
      db.close();
    }
  }
  const schema = new URL(url).searchParams.get('schema') as string;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query(`UPDATE "${schema}".idempotency SET owner = $1 WHERE key = $2`, [owner, key])).rowCount ?? 0;
  } finally {
    await client.end();
  }
}

describe('a step with a business key that loses its lease', () => {
  it("aborts the step's signal with a reason saying the lease was lost when another owner takes the record over", async () => {
    const clock = new ManualClock();
    const entered = gate();
    let reason: unknown;
    const wf = workflow('charge-order', async (ctx) =>
      ctx.step(
        'charge-card',
        ({ signal }) =>
          new Promise<string>((resolve) => {
            signal.addEventListener('abort', () => ((reason = signal.reason), resolve('stopped')), { once: true });
            entered.open();
          }),
        { key: 'order:1' },
      ),
    );
    const url = tempDbUrl();
    const engine = makeEngine({ store: url, workflows: [wf], clock });
    // Long worker leases: only the record's renewal is due when the clock moves.
    await startWorker(engine, { leaseMs: 3_600_000, heartbeatMs: 600_000 });
    await engine.start(wf);
    await entered.promise;
    expect(await takeOver(url, 'v1:order:1', 'task:someone-else')).toBe(1);
    expect(reason).toBeUndefined();
    // The next renewal (a third of the 30 s record lease) is refused: the step is told to stop.
    await clock.advance('10s');
    await eventually(() => reason !== undefined, 10_000, "the step's signal to fire");
    expect(isStepwiseError(reason, 'CONFLICT')).toBe(true);
    expect((reason as Error).message).toMatch(/lost idempotency key "v1:order:1": its record was taken over/);
  });
});
