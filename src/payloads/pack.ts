/**
 * @module payloads/pack
 * Internal: not part of the public API.
 * Blob bytes: a content's address, and the bytes kept for it (compressed, then sealed by the
 * codec when there is one). Compression is brotli in text mode, chosen by measurement on JSON chat
 * messages of ~1 KB (docs/payloads.md): it kept 0.44 of the bytes where gzip kept 0.49, at the
 * same speed (~80 µs a message); contents under 128 bytes, or that do not shrink, are kept as they are.
 */
import { createHash, createHmac } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync, constants } from 'node:zlib';
import type { PayloadCodec } from './codec.ts';
import { PayloadUnreadableError } from '../errors.ts';

/** The first byte of a packed blob (before a codec): distinct from what a codec writes first. */
const RAW = 0x72; // 'r'
const BROTLI = 0x62; // 'b'
/** Contents smaller than this are not worth compressing. */
const COMPRESS_FROM = 128;
/** Above this, a faster brotli level (quality 4 instead of 5 kept ~7% more bytes and took half the time on 400 KB). */
const LARGE = 256 * 1024;

export class Packer {
  readonly codec: PayloadCodec | null;
  constructor(codec: PayloadCodec | null) {
    this.codec = codec;
  }

  /** The address of a content: its SHA-256 (an HMAC under the codec's address key, with one), base64url. */
  address(content: Uint8Array): string {
    const h = this.codec?.addressKey ? createHmac('sha256', this.codec.addressKey) : createHash('sha256');
    return h.update(content).digest('base64url');
  }

  pack(content: Uint8Array): Uint8Array {
    let body: Uint8Array = content;
    let flag = RAW;
    if (content.length >= COMPRESS_FROM) {
      const quality = content.length > LARGE ? 4 : 5;
      const z = brotliCompressSync(content, {
        params: { [constants.BROTLI_PARAM_QUALITY]: quality, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT, [constants.BROTLI_PARAM_SIZE_HINT]: content.length },
      });
      if (z.length < content.length) {
        body = z;
        flag = BROTLI;
      }
    }
    const framed = new Uint8Array(body.length + 1);
    framed[0] = flag;
    framed.set(body, 1);
    return this.codec ? this.codec.encode(framed) : framed;
  }

  unpack(bytes: Uint8Array, hash: string): Uint8Array {
    // A blob stored before the codec was configured is read as it is (its address still checks it).
    const framed = this.codec && bytes[0] !== RAW && bytes[0] !== BROTLI ? this.codec.decode(bytes) : bytes;
    const body = framed.subarray(1);
    switch (framed[0]) {
      case RAW:
        return body;
      case BROTLI:
        try {
          return brotliDecompressSync(body);
        } catch (e) {
          throw new PayloadUnreadableError(`Blob ${hash} does not decompress (${(e as Error).message}): its bytes are damaged.`);
        }
      default:
        throw new PayloadUnreadableError(
          `Blob ${hash} is not in a format this version reads (first byte ${framed[0]}): ${this.codec ? 'it may have been written with another codec' : 'it was probably encrypted: configure new Engine({ codec }) with its keys (the CLI: STEPWISE_CODEC_KEYS)'}.`,
        );
    }
  }

  /** A small value sealed by the codec, as base64 (no compression: too small to gain). */
  seal(text: string): string {
    return Buffer.from(this.codec!.encode(Buffer.from(text, 'utf8'))).toString('base64');
  }

  unseal(base64: string): string {
    if (!this.codec)
      throw new PayloadUnreadableError('A stored payload is encrypted and this engine has no codec: configure new Engine({ codec }) with its keys (the CLI: STEPWISE_CODEC_KEYS).');
    return Buffer.from(this.codec.decode(Buffer.from(base64, 'base64'))).toString('utf8');
  }
}
