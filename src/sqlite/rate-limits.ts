/**
 * @module sqlite/rate-limits
 * Internal: not part of the public API.
 * Rate-limit draws on SQLite: pruned, checked and appended inside one write transaction (BEGIN
 * IMMEDIATE: one writer at a time, so draws of every limit are serialized). Where a draw goes is
 * `store-sql/rate-window.ts`.
 */
import type { RateDraw, RateDrawRequest } from '../store.ts';
import { placeDraw, placeNow, type LoggedDraw } from '../store-sql/rate-window.ts';
import type { Raw, SqliteContext } from './context.ts';

export function drawRate(c: SqliteContext, r: RateDrawRequest): RateDraw {
  return c.tx(() => {
    const since = r.now - r.perMs;
    c.stmt('DELETE FROM stepwise_rate_draws WHERE name = ? AND key = ? AND at <= ?').run(r.name, r.key, since);
    const sums = c
      .stmt('SELECT COALESCE(SUM(requests), 0) AS requests, COALESCE(SUM(tokens), 0) AS tokens, MAX(at) AS last FROM stepwise_rate_draws WHERE name = ? AND key = ? AND at > ?')
      .get(r.name, r.key, since) as Raw;
    let at = placeNow(r, { requests: Number(sums.requests), tokens: Number(sums.tokens), lastAt: sums.last === null ? null : Number(sums.last) });
    if (at === null) {
      const log = (c.stmt('SELECT at, requests, tokens FROM stepwise_rate_draws WHERE name = ? AND key = ? AND at > ? ORDER BY at, id').all(r.name, r.key, since) as Raw[]).map(
        (x): LoggedDraw => ({ at: Number(x.at), requests: Number(x.requests), tokens: Number(x.tokens) }),
      );
      at = placeDraw(r, log);
    }
    const id = c.stmt('INSERT INTO stepwise_rate_draws (name, key, at, requests, tokens) VALUES (?, ?, ?, ?, ?)').run(r.name, r.key, at, r.takeRequests, r.takeTokens).lastInsertRowid;
    return { id: Number(id), at };
  });
}

export function settleRate(c: SqliteContext, id: number, tokens: number): void {
  c.tx(() => c.stmt('UPDATE stepwise_rate_draws SET tokens = ? WHERE id = ?').run(tokens, id));
}
