/**
 * @module payloads/backends
 * Where the payload store keeps blob bytes when not in the database: a directory on disk, or
 * S3-compatible object storage (`s3Backend` in `payloads/s3.ts`). The database always keeps the
 * blob's row (its hash, sizes, owners and the location of its bytes); a backend keeps the bytes.
 * A blob's bytes are written to the backend before the row that names them, and the row before
 * any checkpoint that refers to it: a crash leaves at most bytes no row names (collected by
 * `sweep`), never a checkpoint without its bytes.
 */
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

/** The name of a blob's bytes: its address (43 base64url characters), a dot, 12 hex digits. */
export const BLOB_NAME = /^[A-Za-z0-9_-]{43}\.[0-9a-f]{12}$/;

/** Keeps blob bytes outside the database. Locations are chosen by the backend at `put`. */
export interface BlobBackend {
  /** Names the backend in messages (`directory /var/lib/app/blobs`, `s3 bucket/prefix`). */
  readonly description: string;
  /** Stores bytes under a new location and returns it (a blob stored again gets another one). */
  put(hash: string, bytes: Uint8Array): Promise<string>;
  /** The bytes at `location`, or null if there are none. */
  get(location: string): Promise<Uint8Array | null>;
  /** Deletes the bytes at these locations (a location with none is not an error). */
  delete(locations: readonly string[]): Promise<void>;
  /**
   * Bytes written before `before` (ms), with the hash they were stored for: collection deletes
   * those no row names (bytes stored by a writer that died before writing their row).
   */
  list?(before: number): AsyncIterable<{ location: string; hash: string }>;
  /** Releases what the backend holds open (called by whoever made it, not by the engine). */
  close?(): Promise<void>;
}

/** Blob bytes as files under `root` (`<root>/<hash[0..2]>/<hash>.<nonce>`), written atomically (temp file, fsync, rename). */
export function directoryBackend(root: string): BlobBackend {
  return {
    description: `directory ${root}`,
    async put(hash, bytes) {
      const dir = join(root, hash.slice(0, 2));
      await mkdir(dir, { recursive: true });
      const name = `${hash}.${randomBytes(6).toString('hex')}`;
      const tmp = join(dir, `.${name}.tmp`);
      const f = await open(tmp, 'w');
      try {
        await f.writeFile(bytes);
        await f.sync();
      } finally {
        await f.close();
      }
      await rename(tmp, join(dir, name));
      return `${hash.slice(0, 2)}/${name}`;
    },
    async get(location) {
      try {
        return await readFile(join(root, location));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw e;
      }
    },
    async delete(locations) {
      await Promise.all(locations.map((l) => rm(join(root, l), { force: true })));
    },
    async *list(before) {
      let dirs: string[];
      try {
        dirs = await readdir(root);
      } catch {
        return;
      }
      for (const d of dirs) {
        let names: string[];
        try {
          names = await readdir(join(root, d));
        } catch {
          continue;
        }
        for (const n of names) {
          const s = await stat(join(root, d, n)).catch(() => null);
          // Temp files of a write in progress start with '.'; an old one is a write that died.
          if (n.startsWith('.') && s && s.mtimeMs < before) {
            await rm(join(root, d, n), { force: true });
            continue;
          }
          // Only names this backend writes (`<hash>.<nonce>` in a folder of the hash's first two characters).
          if (!BLOB_NAME.test(n) || n.slice(0, 2) !== d || !s || s.mtimeMs >= before) continue;
          yield { location: `${d}/${n}`, hash: n.slice(0, n.lastIndexOf('.')) };
        }
      }
    },
  };
}
