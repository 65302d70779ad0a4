/**
 * @module payloads/collection
 * Internal: not part of the public API.
 * Collection of the payload store: blobs no task holds any more, deleted with their bytes; and,
 * in a backend that can list what it keeps, bytes that no row names (their writer died before
 * writing the row, or stored a copy of a blob that existed), deleted once old enough.
 */
import type { Store } from '../store.ts';
import type { BlobBackend } from './backends.ts';

/** Deletes at most `limit` blobs no task holds, untouched since `before`, with their bytes in `backend`; returns how many. */
export async function collectBlobs(store: Store, backend: BlobBackend | null, before: number, limit: number): Promise<number> {
  const dead = await store.collectBlobs(before, limit);
  const locations = dead.flatMap((d) => (d.location === null ? [] : [d.location]));
  if (locations.length && backend) await backend.delete(locations);
  if (backend?.list && dead.length < limit) await sweepBackend(store, backend, before, limit);
  return dead.length;
}

/** Deletes bytes in the backend that no row names, older than `before`. */
async function sweepBackend(store: Store, backend: BlobBackend, before: number, limit: number): Promise<void> {
  let batch: Array<{ location: string; hash: string }> = [];
  const check = async (): Promise<void> => {
    const rows = await store.getBlobs(batch.map((b) => b.hash));
    const orphans = batch.filter((b) => rows.get(b.hash)?.location !== b.location).map((b) => b.location);
    if (orphans.length) await backend.delete(orphans);
    batch = [];
  };
  for await (const entry of backend.list!(before)) {
    batch.push(entry);
    if (batch.length >= limit) await check();
  }
  if (batch.length) await check();
}
