/**
 * @module payloads/codec
 * Codecs turn the bytes the engine stores into other bytes and back: `aesGcmCodec` encrypts them
 * at rest. A codec is applied to every payload the engine stores (inputs, outputs, errors, signal
 * and approval payloads, idempotency results, schedule inputs, stream frames), after compression.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { InvalidArgumentError, PayloadUnreadableError } from '../errors.ts';

/** Turns stored bytes into other bytes and back (`new Engine({ codec })`). */
export interface PayloadCodec {
  /** Names the codec in errors. */
  readonly name: string;
  encode(data: Uint8Array): Uint8Array;
  decode(data: Uint8Array): Uint8Array;
  /**
   * When set, blobs are addressed by an HMAC of their content under this key instead of a plain
   * SHA-256, so that the address of an encrypted value does not reveal a guessable plaintext.
   */
  readonly addressKey?: Uint8Array;
}

/** The keys of {@link aesGcmCodec}. */
export interface AesGcmCodecOptions {
  /** Keys by id: 32 bytes each (a Buffer/Uint8Array, or base64 text). Keep old keys to read old values. */
  keys: Readonly<Record<string, Uint8Array | string>>;
  /** The id of the key new values are encrypted with. */
  current: string;
}

/** The first byte of a sealed value (distinct from the first byte of an unsealed blob). */
const VERSION = 0xa1;

/**
 * AES-256-GCM with a random 96-bit nonce per value. A sealed value names its key id, so a key can
 * be rotated: set a new `current` and keep the old key under its id until old values are gone.
 * A value whose key is missing, or whose bytes were altered, fails to decode with
 * PAYLOAD_UNREADABLE.
 */
export function aesGcmCodec(options: AesGcmCodecOptions): PayloadCodec {
  const keys = new Map<string, Buffer>();
  for (const [id, raw] of Object.entries(options.keys)) {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(id)) throw new InvalidArgumentError(`aesGcmCodec: key id ${JSON.stringify(id)} must be 1–64 letters, digits, '_', '.' or '-'`);
    const key = typeof raw === 'string' ? Buffer.from(raw, 'base64') : Buffer.from(raw);
    if (key.length !== 32)
      throw new InvalidArgumentError(`aesGcmCodec: key ${JSON.stringify(id)} has ${key.length} bytes; AES-256 needs 32 (for example crypto.randomBytes(32), or its base64)`);
    keys.set(id, key);
  }
  const current = keys.get(options.current);
  if (!current) throw new InvalidArgumentError(`aesGcmCodec: current key ${JSON.stringify(options.current)} is not among keys (${[...keys.keys()].join(', ') || 'none'})`);
  const currentId = Buffer.from(options.current, 'utf8');
  return {
    name: 'aes-256-gcm',
    addressKey: createHmac('sha256', current).update('stepwise payload address').digest(),
    encode(data) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', current, iv);
      const body = Buffer.concat([cipher.update(data), cipher.final()]);
      return Buffer.concat([Buffer.from([VERSION, currentId.length]), currentId, iv, cipher.getAuthTag(), body]);
    },
    decode(data) {
      const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
      if (buf.length < 2 || buf[0] !== VERSION) throw unreadable('it was not written by this codec (stored before the codec was configured?)');
      const idEnd = 2 + buf[1]!;
      const id = buf.subarray(2, idEnd).toString('utf8');
      const key = keys.get(id);
      if (!key) throw unreadable(`its key "${id}" is not among the codec's keys (keep old keys in aesGcmCodec({ keys }) to read old values)`);
      const iv = buf.subarray(idEnd, idEnd + 12);
      const tag = buf.subarray(idEnd + 12, idEnd + 28);
      if (tag.length !== 16) throw unreadable('it is too short to be a sealed value');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: 16 });
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(buf.subarray(idEnd + 28)), decipher.final()]);
      } catch {
        throw unreadable(`it does not authenticate under key "${id}" (altered, or another key of that id)`);
      }
    },
  };
}

function unreadable(why: string): PayloadUnreadableError {
  return new PayloadUnreadableError(`A stored payload cannot be decoded: ${why}.`);
}
