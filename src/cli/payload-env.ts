/**
 * @module cli/payload-env
 * The payload store's settings of every `stepwise` command, from the environment, so that the CLI
 * and `stepwise serve` read what workers wrote with a codec or a blob directory:
 * - `STEPWISE_CODEC_KEYS` (`id=base64key,id2=base64key`) and `STEPWISE_CODEC_CURRENT` (the id new
 *   values are encrypted with; the last listed when unset): `aesGcmCodec`;
 * - `STEPWISE_BLOB_DIR`: blob bytes in that directory (`directoryBackend`).
 */
import { InvalidArgumentError, aesGcmCodec, directoryBackend, type EngineOptions } from '../index.ts';

export function payloadOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Pick<EngineOptions, 'codec' | 'payloads'> {
  const out: Pick<EngineOptions, 'codec' | 'payloads'> = {};
  const keysText = env.STEPWISE_CODEC_KEYS?.trim();
  if (keysText) {
    const keys: Record<string, string> = {};
    for (const pair of keysText.split(',')) {
      const eq = pair.indexOf('=');
      if (eq < 1) throw new InvalidArgumentError(`STEPWISE_CODEC_KEYS: each key is id=base64 (comma-separated), got ${JSON.stringify(pair.slice(0, 20))}…`);
      keys[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
    }
    const ids = Object.keys(keys);
    out.codec = aesGcmCodec({ keys, current: env.STEPWISE_CODEC_CURRENT?.trim() || (ids[ids.length - 1] as string) });
  } else if (env.STEPWISE_CODEC_CURRENT) {
    throw new InvalidArgumentError('STEPWISE_CODEC_CURRENT is set without STEPWISE_CODEC_KEYS: give the keys (id=base64,…).');
  }
  const dir = env.STEPWISE_BLOB_DIR?.trim();
  if (dir) out.payloads = { backend: directoryBackend(dir) };
  return out;
}
