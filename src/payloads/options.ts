/**
 * @module payloads/options
 * `new Engine({ payloads, codec })`: checked and resolved.
 */
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import { checkOptionKeys, optionNames } from '../option-keys.ts';
import type { BlobBackend } from './backends.ts';
import type { PayloadCodec } from './codec.ts';

/** Where large values go (`new Engine({ payloads })`); see docs/payloads.md. */
export interface PayloadOptions {
  /**
   * A value whose JSON is at least this many characters is kept in the payload store: once per
   * distinct content, compressed, a growing list stored by what is new. Smaller ones stay in
   * their row. At least 256.
   * @defaultValue 4096
   */
  threshold?: number;
  /**
   * Where blob bytes are kept: the engine's database (the default: nothing to set up), or a
   * backend such as `directoryBackend(path)` or `s3Backend({ bucket, client })`. The database
   * always keeps each blob's row and who holds it.
   */
  backend?: BlobBackend;
  /**
   * How long a blob no task holds is kept before workers delete it. A write that reuses a blob
   * refreshes it, so this only has to outlast one write. @defaultValue '1h'
   */
  collectAfter?: Duration;
}

export const PAYLOAD_OPTIONS = optionNames<PayloadOptions>()('threshold', 'backend', 'collectAfter');

export interface ResolvedPayloads {
  threshold: number | false;
  backend: BlobBackend | null;
  collectAfterMs: number;
  codec: PayloadCodec | null;
}

export const DEFAULT_THRESHOLD = 4096;
const MIN_THRESHOLD = 256;

export function resolvePayloads(options: PayloadOptions | false | undefined, codec: PayloadCodec | undefined): ResolvedPayloads {
  if (codec !== undefined && (typeof codec !== 'object' || codec === null || typeof codec.encode !== 'function' || typeof codec.decode !== 'function')) {
    throw new InvalidArgumentError('new Engine({ codec }): a codec has encode(bytes) and decode(bytes), for example aesGcmCodec({ keys, current }).');
  }
  if (options === false) return { threshold: false, backend: null, collectAfterMs: 3_600_000, codec: codec ?? null };
  checkOptionKeys(options, PAYLOAD_OPTIONS, 'new Engine({ payloads })');
  const threshold = options?.threshold ?? DEFAULT_THRESHOLD;
  if (!Number.isInteger(threshold) || threshold < MIN_THRESHOLD) {
    throw new InvalidArgumentError(
      `new Engine({ payloads }): threshold is a whole number of characters, at least ${MIN_THRESHOLD}; got ${JSON.stringify(threshold)}. Pass payloads: false to keep every value in its row.`,
    );
  }
  const backend = options?.backend ?? null;
  if (backend !== null && (typeof backend.put !== 'function' || typeof backend.get !== 'function' || typeof backend.delete !== 'function')) {
    throw new InvalidArgumentError('new Engine({ payloads: { backend } }): a backend has put, get and delete, for example directoryBackend(path) or s3Backend({ bucket, client }).');
  }
  const collectAfterMs = options?.collectAfter === undefined ? 3_600_000 : toMs(options.collectAfter, 'payloads.collectAfter');
  return { threshold, backend, collectAfterMs, codec: codec ?? null };
}
