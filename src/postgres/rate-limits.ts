/**
 * @module postgres/rate-limits
 * Internal: not part of the public API.
 * Rate-limit draws on PostgreSQL: the draws of one limit and key serialize on a transaction-level
 * advisory lock (`pg_advisory_xact_lock`, on a key naming the schema, the limit and its key), so
 * that each is pruned, checked and appended while no other draw of that limit and key runs; draws
 * of other limits and keys do not wait. Under READ COMMITTED each statement after the lock sees
 * every draw committed before it. Where a draw goes is `store-sql/rate-window.ts`; its common case
 * (room in the window now) is also the SQL function `rate_draw_now` (migration 000016), which does
 * it in one round trip.
 */
import type { RateDraw, RateDrawRequest } from '../store.ts';
import { placeDraw, placeNow, type LoggedDraw } from '../store-sql/rate-window.ts';
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';

const table = (c: PgContext): string => `"${c.schema.replaceAll('"', '""')}".rate_draws`;

const lockKey = (c: PgContext, r: RateDrawRequest): string => `stepwise:rate:${c.schema}:${JSON.stringify([r.name, r.key])}`;

export async function drawRate(c: PgContext, r: RateDrawRequest): Promise<RateDraw> {
  // The common case, room in the window now: one round trip (the function `rate_draw_now`).
  const [now] = await run(c, () =>
    rows(c, poolOf(c), `SELECT "${c.schema.replaceAll('"', '""')}".rate_draw_now($1, $2, $3, $4, $5, $6, $7, $8, $9) AS id`, [
      lockKey(c, r),
      r.name,
      r.key,
      r.now - r.perMs,
      r.now,
      r.requests,
      r.tokens,
      r.takeRequests,
      r.takeTokens,
    ]),
  );
  if (now?.id !== null && now?.id !== undefined) return { id: Number(now.id), at: r.now };
  return placeLater(c, r);
}

/** A draw the window has no room for now: placed when capacity returns, in a transaction of its own. */
function placeLater(c: PgContext, r: RateDrawRequest): Promise<RateDraw> {
  const t = table(c);
  return run(c, () =>
    tx(c, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [lockKey(c, r)]);
      const since = r.now - r.perMs;
      // The DELETE runs whether or not the SELECT reads it; the SELECT's window excludes what it prunes.
      const [sums] = await rows(
        c,
        client,
        `WITH pruned AS (DELETE FROM ${t} WHERE name = $1 AND key = $2 AND at <= $3 RETURNING 1)
         SELECT COALESCE(SUM(requests), 0)::bigint AS requests, COALESCE(SUM(tokens), 0)::bigint AS tokens, MAX(at) AS last FROM ${t} WHERE name = $1 AND key = $2 AND at > $3`,
        [r.name, r.key, since],
      );
      const last = sums?.last;
      let at = placeNow(r, { requests: Number(sums?.requests ?? 0), tokens: Number(sums?.tokens ?? 0), lastAt: last === null || last === undefined ? null : Number(last) });
      if (at === null) {
        const log = (await rows(c, client, `SELECT at, requests, tokens FROM ${t} WHERE name = $1 AND key = $2 AND at > $3 ORDER BY at, id`, [r.name, r.key, since])).map(
          (x): LoggedDraw => ({ at: Number(x.at), requests: Number(x.requests), tokens: Number(x.tokens) }),
        );
        at = placeDraw(r, log);
      }
      const [row] = await rows(c, client, `INSERT INTO ${t} (name, key, at, requests, tokens) VALUES ($1, $2, $3, $4, $5) RETURNING id`, [r.name, r.key, at, r.takeRequests, r.takeTokens]);
      return { id: Number(row?.id), at };
    }),
  );
}

export async function settleRate(c: PgContext, id: number, tokens: number): Promise<void> {
  await run(c, () => rows(c, poolOf(c), `UPDATE ${table(c)} SET tokens = $2 WHERE id = $1`, [id, tokens]));
}
