/**
 * @module postgres/blobs
 * Internal: not part of the public API.
 * The payload store's rows on PostgreSQL (see store/blobs.ts). A write that reuses a blob updates
 * its `touched_at` (taking the row's lock); collection locks its candidates (SKIP LOCKED) and
 * deletes them `WHERE touched_at < $before`, which PostgreSQL rechecks on the row's newest version:
 * a blob touched by a write that committed meanwhile is kept, and a blob collected first is
 * inserted again by the write (ON CONFLICT finds no row once the delete committed).
 */
import type { BlobUsage, BlobWrite, StoredBlob } from '../store.ts';
import type { ClientBase } from 'pg';
import { poolOf, rows, run, tx, type PgContext } from './connection.ts';

const bytes = (d: Uint8Array | null): Buffer | null => (d === null ? null : Buffer.from(d.buffer, d.byteOffset, d.byteLength));

export async function putBlobs(c: PgContext, w: BlobWrite): Promise<void> {
  if (!w.blobs.length) return;
  await run(c, () => tx(c, (client) => writeBlobs(c, client, w)));
}

/** The statements of {@link putBlobs}, on a connection already in a transaction (a transactional step's). */
export async function writeBlobs(c: PgContext, client: ClientBase, w: BlobWrite): Promise<void> {
  const t = c.t;
  const sorted = [...w.blobs].sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  await client.query(
    `INSERT INTO ${t.blobs} (hash, size, stored, data, location, touched_at)
     SELECT h, s, st, d, l, $6 FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], $5::text[]) AS x(h, s, st, d, l)
     ON CONFLICT (hash) DO UPDATE SET touched_at = greatest(${t.blobs}.touched_at, excluded.touched_at)`,
    [sorted.map((b) => b.hash), sorted.map((b) => b.size), sorted.map((b) => b.stored), sorted.map((b) => bytes(b.data)), sorted.map((b) => b.location), w.at],
  );
  await hold(
    c,
    client,
    w.owners,
    sorted.map((b) => b.hash),
  );
}

export async function touchBlobs(c: PgContext, w: { owners: readonly string[]; hashes: readonly string[]; at: number }): Promise<Set<string>> {
  if (!w.hashes.length) return new Set();
  const sorted = [...w.hashes].sort();
  return run(c, () =>
    tx(c, async (client) => {
      const { rows: found } = await client.query<{ hash: string }>(
        `UPDATE ${c.t.blobs} b SET touched_at = greatest(b.touched_at, $2) FROM (SELECT hash FROM ${c.t.blobs} WHERE hash = ANY($1::text[]) ORDER BY hash FOR UPDATE) AS l
         WHERE b.hash = l.hash RETURNING b.hash`,
        [sorted, w.at],
      );
      const hashes = found.map((r) => r.hash);
      await hold(c, client, w.owners, hashes);
      return new Set(hashes);
    }),
  );
}

async function hold(c: PgContext, client: ClientBase, owners: readonly string[], hashes: readonly string[]): Promise<void> {
  if (!owners.length || !hashes.length) return;
  await client.query(`INSERT INTO ${c.t.taskBlobs} (task_id, hash) SELECT o, h FROM unnest($1::text[]) AS o, unnest($2::text[]) AS h ORDER BY 1, 2 ON CONFLICT DO NOTHING`, [owners, hashes]);
}

export async function getBlobs(c: PgContext, hashes: readonly string[]): Promise<Map<string, StoredBlob>> {
  const out = new Map<string, StoredBlob>();
  if (!hashes.length) return out;
  const found = await run(c, () => rows(c, poolOf(c), `SELECT hash, data, location FROM ${c.t.blobs} WHERE hash = ANY($1::text[])`, [hashes]));
  for (const r of found) out.set(r.hash as string, { data: (r.data as Buffer | null) ?? null, location: (r.location as string | null) ?? null });
  return out;
}

export async function shareBlobs(c: PgContext, from: string, to: string): Promise<void> {
  await run(c, () => rows(c, poolOf(c), `INSERT INTO ${c.t.taskBlobs} (task_id, hash) SELECT $2, hash FROM ${c.t.taskBlobs} WHERE task_id = $1 ON CONFLICT DO NOTHING`, [from, to]));
}

export async function collectBlobs(c: PgContext, before: number, limit: number): Promise<Array<{ hash: string; location: string | null }>> {
  const t = c.t;
  return run(c, () =>
    tx(c, async (client) => {
      await client.query(
        `DELETE FROM ${t.taskBlobs} WHERE (task_id, hash) IN (
           SELECT h.task_id, h.hash FROM ${t.taskBlobs} h JOIN ${t.blobs} b ON b.hash = h.hash
           WHERE b.touched_at < $1 AND NOT EXISTS (SELECT 1 FROM ${t.tasks} k WHERE k.id = h.task_id) LIMIT $2)`,
        [before, limit],
      );
      const { rows: dead } = await client.query<{ hash: string; location: string | null }>(
        `DELETE FROM ${t.blobs} WHERE hash IN (
           SELECT hash FROM ${t.blobs} b WHERE touched_at < $1 AND NOT EXISTS (SELECT 1 FROM ${t.taskBlobs} h WHERE h.hash = b.hash)
           LIMIT $2 FOR UPDATE SKIP LOCKED
         ) AND touched_at < $1
         RETURNING hash, location`,
        [before, limit],
      );
      return dead;
    }),
  );
}

export async function blobUsage(c: PgContext): Promise<BlobUsage> {
  const [b] = await run(c, () =>
    rows(
      c,
      poolOf(c),
      `SELECT count(*)::bigint AS n, coalesce(sum(size), 0)::bigint AS size, coalesce(sum(stored), 0)::bigint AS stored, (SELECT count(*) FROM ${c.t.taskBlobs})::bigint AS holdings FROM ${c.t.blobs}`,
    ),
  );
  return { blobs: Number(b!.n), size: Number(b!.size), stored: Number(b!.stored), holdings: Number(b!.holdings) };
}
