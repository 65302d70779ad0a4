/**
 * @module store/blobs
 * The payload store's rows: blobs stored once under the hash of their content, and which tasks
 * hold them. The store keeps bytes and ownership; what a blob means (a value, a node of a value's
 * tree) is the payload layer's business (src/payloads/).
 */

/** One blob as written: its content's hash and length, and the bytes to keep (null: an external backend keeps them). */
export interface BlobRow {
  hash: string;
  /** Length of the content before compression and encryption. */
  size: number;
  /** The bytes kept in the database, or null when an external backend holds them. */
  data: Uint8Array | null;
  /** Where an external backend holds the bytes (null: in the database). */
  location: string | null;
  /** Bytes kept (in the database or the backend). */
  stored: number;
}

/** Blobs to keep, and the tasks that hold them (each owner holds every hash listed). */
export interface BlobWrite {
  owners: readonly string[];
  /** New or reused blobs: inserted, or touched when present (their bytes are not rewritten). */
  blobs: readonly BlobRow[];
  at: number;
}

/** What the payload store holds, for operators and the bench. */
export interface BlobUsage {
  blobs: number;
  /** Sum of the contents' lengths. */
  size: number;
  /** Sum of the bytes kept. */
  stored: number;
  /** Rows of task ownership. */
  holdings: number;
}

/** Blobs a write reuses: touched if they exist, and held by every owner. */
export interface BlobTouch {
  owners: readonly string[];
  hashes: readonly string[];
  at: number;
}

/** A blob collection deleted: its hash, and where a backend kept its bytes (null: the database). */
export interface CollectedBlob {
  hash: string;
  location: string | null;
}

/** A blob as read: its bytes in the database, or where a backend keeps them. */
export interface StoredBlob {
  data: Uint8Array | null;
  location: string | null;
}

export interface BlobStore {
  /**
   * Inserts the blobs that are absent and touches those present (`touched_at = at`, under the row's
   * lock), and records every owner as holding every blob, in one transaction.
   */
  putBlobs(write: BlobWrite): Promise<void>;
  /** {@link putBlobs}, done before returning, on a synchronous driver (SQLite). */
  putBlobsNow?(write: BlobWrite): void;
  /**
   * Touches the blobs of `hashes` that exist (as {@link putBlobs} does) and records every owner as
   * holding them, in one transaction; returns the hashes that exist. An external backend's writer
   * asks first, then stores the bytes of the others under new locations.
   */
  touchBlobs(write: BlobTouch): Promise<Set<string>>;
  /** The blobs of `hashes` that exist: their bytes kept in the database, or their location in a backend. */
  getBlobs(hashes: readonly string[]): Promise<Map<string, StoredBlob>>;
  /** {@link getBlobs}, done before returning, on a synchronous driver (SQLite). */
  getBlobsNow?(hashes: readonly string[]): Map<string, StoredBlob>;
  /** Records `to` as holding every blob `from` holds (a fork shares its source's values). */
  shareBlobs(from: string, to: string): Promise<void>;
  /**
   * Deletes at most `limit` blobs that no task holds and that were last touched before `before`;
   * also forgets holdings of tasks that do not exist (a start that crashed before its task was
   * written, a start that found an existing task) once their blob is past `before`. Returns the
   * deleted blobs with their backend location (null: the database kept the bytes).
   */
  collectBlobs(before: number, limit: number): Promise<CollectedBlob[]>;
  blobUsage(): Promise<BlobUsage>;
  /**
   * Offered by the payload layer (src/payloads/), not by a database: the payloads behind column
   * texts that a claim left as references (a completed step's recorded output), in order. A run
   * loads them as its replay reaches them, a few at a time, instead of holding every recorded
   * value from the claim on.
   */
  resolvePayloads?(texts: readonly string[]): Promise<string[]>;
}
