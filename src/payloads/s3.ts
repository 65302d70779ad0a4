/**
 * @module payloads/s3
 * Blob bytes in S3-compatible object storage (AWS S3, MinIO, R2, …), through the AWS SDK's
 * `S3Client` that the application makes (credentials, region, endpoint are its own). The package
 * `@aws-sdk/client-s3` is loaded when the backend is first used; install it to use this backend.
 */
import { randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '../errors.ts';
import { BLOB_NAME, type BlobBackend } from './backends.ts';

/** The part of the SDK's `S3Client` the backend uses. */
export interface S3ClientLike {
  send(command: unknown): Promise<unknown>;
}

export interface S3BackendOptions {
  /** A client of `@aws-sdk/client-s3` (`new S3Client({ region, endpoint, credentials })`). */
  client: S3ClientLike;
  bucket: string;
  /** Keys start with it (for example `stepwise/blobs/`). @defaultValue '' */
  prefix?: string;
}

type SdkModule = typeof import('@aws-sdk/client-s3');

/** Blob bytes as objects `<prefix><hash>.<nonce>` of `bucket`. */
export function s3Backend(options: S3BackendOptions): BlobBackend {
  if (typeof options?.client?.send !== 'function') throw new InvalidArgumentError('s3Backend({ client }): a client of @aws-sdk/client-s3 (new S3Client({ … })).');
  if (typeof options.bucket !== 'string' || !options.bucket) throw new InvalidArgumentError('s3Backend({ bucket }): the name of the bucket, a non-empty string.');
  const { client, bucket } = options;
  const prefix = options.prefix ?? '';
  let sdk: Promise<SdkModule> | null = null;
  const load = (): Promise<SdkModule> =>
    (sdk ??= import('@aws-sdk/client-s3').catch((e: unknown) => {
      sdk = null;
      throw new InvalidArgumentError(`s3Backend: the package @aws-sdk/client-s3 cannot be loaded (npm install @aws-sdk/client-s3): ${(e as Error).message}`);
    }));
  return {
    description: `s3 ${bucket}/${prefix}`,
    async put(hash, bytes) {
      const { PutObjectCommand } = await load();
      const key = `${prefix}${hash}.${randomBytes(6).toString('hex')}`;
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: bytes, ContentLength: bytes.length }));
      return key;
    },
    async get(location) {
      const { GetObjectCommand } = await load();
      try {
        const r = (await client.send(new GetObjectCommand({ Bucket: bucket, Key: location }))) as { Body?: { transformToByteArray(): Promise<Uint8Array> } };
        return r.Body ? await r.Body.transformToByteArray() : null;
      } catch (e) {
        if ((e as { name?: string }).name === 'NoSuchKey' || (e as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404) return null;
        throw e;
      }
    },
    async delete(locations) {
      const { DeleteObjectsCommand } = await load();
      for (let i = 0; i < locations.length; i += 1000) {
        const batch = locations.slice(i, i + 1000);
        await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
      }
    },
    async *list(before) {
      const { ListObjectsV2Command } = await load();
      let token: string | undefined;
      do {
        const page = (await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }))) as {
          Contents?: Array<{ Key?: string; LastModified?: Date }>;
          IsTruncated?: boolean;
          NextContinuationToken?: string;
        };
        for (const o of page.Contents ?? []) {
          if (!o.Key || !o.LastModified || o.LastModified.getTime() >= before) continue;
          const name = o.Key.slice(prefix.length);
          // Only objects this backend writes: others under the prefix are left alone.
          if (BLOB_NAME.test(name)) yield { location: o.Key, hash: name.slice(0, name.lastIndexOf('.')) };
        }
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    },
  };
}
