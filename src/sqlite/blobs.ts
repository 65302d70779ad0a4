/**
 * @module sqlite/blobs
 * Internal: not part of the public API.
 * The payload store's rows on SQLite (see store/blobs.ts). One writer at a time: a write that
 * reuses a blob and a collection that would delete it cannot interleave.
 */
import type { BlobUsage, BlobWrite, StoredBlob } from '../store.ts';
import type Database from 'better-sqlite3';
import type { Raw, SqliteContext } from './context.ts';

const bytes = (d: Uint8Array | null): Buffer | null => (d === null ? null : Buffer.from(d.buffer, d.byteOffset, d.byteLength));

export function putBlobs(c: SqliteContext, w: BlobWrite): void {
  if (!w.blobs.length) return;
  c.tx(() => writeBlobs((sql) => c.stmt(sql), w));
}

/** The statements of {@link putBlobs}, on a connection already in a transaction (a transactional step's). */
export function writeBlobs(prepare: (sql: string) => Database.Statement, w: BlobWrite): void {
  const put = prepare(
    `INSERT INTO stepwise_blobs (hash, size, stored, data, location, touched_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (hash) DO UPDATE SET touched_at = max(touched_at, excluded.touched_at)`,
  );
  for (const b of w.blobs) put.run(b.hash, b.size, b.stored, bytes(b.data), b.location, w.at);
  hold(
    prepare,
    w.owners,
    w.blobs.map((b) => b.hash),
  );
}

export function touchBlobs(c: SqliteContext, w: { owners: readonly string[]; hashes: readonly string[]; at: number }): Set<string> {
  if (!w.hashes.length) return new Set();
  return c.tx(() => {
    const list = JSON.stringify(w.hashes);
    c.stmt('UPDATE stepwise_blobs SET touched_at = max(touched_at, ?) WHERE hash IN (SELECT value FROM json_each(?))').run(w.at, list);
    const found = (c.stmt('SELECT hash FROM stepwise_blobs WHERE hash IN (SELECT value FROM json_each(?))').all(list) as Raw[]).map((r) => r.hash as string);
    hold((sql) => c.stmt(sql), w.owners, found);
    return new Set(found);
  });
}

function hold(prepare: (sql: string) => Database.Statement, owners: readonly string[], hashes: readonly string[]): void {
  const stmt = prepare('INSERT OR IGNORE INTO stepwise_task_blobs (task_id, hash) VALUES (?, ?)');
  for (const owner of owners) for (const h of hashes) stmt.run(owner, h);
}

export function getBlobs(c: SqliteContext, hashes: readonly string[]): Map<string, StoredBlob> {
  const out = new Map<string, StoredBlob>();
  if (!hashes.length) return out;
  const found = c.stmt('SELECT hash, data, location FROM stepwise_blobs WHERE hash IN (SELECT value FROM json_each(?))').all(JSON.stringify(hashes)) as Raw[];
  for (const r of found) out.set(r.hash as string, { data: (r.data as Buffer | null) ?? null, location: (r.location as string | null) ?? null });
  return out;
}

export function shareBlobs(c: SqliteContext, from: string, to: string): void {
  c.tx(() => {
    c.stmt('INSERT OR IGNORE INTO stepwise_task_blobs (task_id, hash) SELECT ?, hash FROM stepwise_task_blobs WHERE task_id = ?').run(to, from);
  });
}

export function collectBlobs(c: SqliteContext, before: number, limit: number): Array<{ hash: string; location: string | null }> {
  return c.tx(() => {
    c.stmt(
      `DELETE FROM stepwise_task_blobs WHERE (task_id, hash) IN (
         SELECT h.task_id, h.hash FROM stepwise_task_blobs h JOIN stepwise_blobs b ON b.hash = h.hash
         WHERE b.touched_at < ? AND NOT EXISTS (SELECT 1 FROM stepwise_tasks t WHERE t.id = h.task_id) LIMIT ?)`,
    ).run(before, limit);
    const dead = c
      .stmt(
        `SELECT hash, location FROM stepwise_blobs b
         WHERE touched_at < ? AND NOT EXISTS (SELECT 1 FROM stepwise_task_blobs h WHERE h.hash = b.hash) LIMIT ?`,
      )
      .all(before, limit) as Raw[];
    if (!dead.length) return [];
    c.stmt('DELETE FROM stepwise_blobs WHERE hash IN (SELECT value FROM json_each(?))').run(JSON.stringify(dead.map((d) => d.hash)));
    return dead.map((d) => ({ hash: d.hash as string, location: (d.location as string | null) ?? null }));
  });
}

export function blobUsage(c: SqliteContext): BlobUsage {
  const b = c.stmt('SELECT count(*) AS n, coalesce(sum(size), 0) AS size, coalesce(sum(stored), 0) AS stored FROM stepwise_blobs').get() as Raw;
  const h = c.stmt('SELECT count(*) AS n FROM stepwise_task_blobs').get() as Raw;
  return { blobs: Number(b.n), size: Number(b.size), stored: Number(b.stored), holdings: Number(h.n) };
}
