// The CLI reads what workers wrote with a codec or a blob directory when it is given the same
// settings through the environment (STEPWISE_CODEC_KEYS / STEPWISE_CODEC_CURRENT, STEPWISE_BLOB_DIR),
// and without them says which key is missing instead of showing ciphertext.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, aesGcmCodec, directoryBackend, workflow } from '../src/index.ts';
import { payloadOptionsFromEnv } from '../src/cli/payload-env.ts';
import { FAST, tempDir } from './support/engine.ts';
import { runCli } from './support/processes.ts';

const echo = workflow('echo-doc', async (ctx, input: { doc: string }) => ctx.step('echo', () => input.doc.length));

describe('the CLI on an encrypted store with blobs in a directory', () => {
  it('shows the task with the keys and the directory from the environment, and names the missing key without them', async () => {
    const dir = tempDir();
    const url = `sqlite:${join(dir, 'sealed.db')}`;
    const blobs = join(dir, 'blobs');
    const key = Buffer.alloc(32, 9).toString('base64');
    const engine = new Engine({ store: url, workflows: [echo], codec: aesGcmCodec({ keys: { k1: key }, current: 'k1' }), payloads: { backend: directoryBackend(blobs) } });
    try {
      await engine.worker(FAST).start();
      const { id } = await engine.start(echo, { doc: `needle ${'x'.repeat(8000)}` });
      expect(await engine.result(id)).toBe(8007);
      const env = { STEPWISE_CODEC_KEYS: `k1=${key}`, STEPWISE_BLOB_DIR: blobs };
      const shown = runCli(['show', id, '--db', url], env);
      expect(shown.code, shown.err).toBe(0);
      expect(shown.out).toContain('{"doc":"needle xxx');
      const refused = runCli(['show', id, '--db', url], { STEPWISE_BLOB_DIR: blobs });
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain('PAYLOAD_UNREADABLE');
      expect(refused.err).toContain('new Engine({ codec })');
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('refuses a malformed key list and a current key without keys', () => {
    expect(() => payloadOptionsFromEnv({ STEPWISE_CODEC_KEYS: 'nokey' })).toThrow(/id=base64/);
    expect(() => payloadOptionsFromEnv({ STEPWISE_CODEC_CURRENT: 'k1' })).toThrow(/without STEPWISE_CODEC_KEYS/);
    expect(() => payloadOptionsFromEnv({ STEPWISE_CODEC_KEYS: 'k1=AAAA' })).toThrow(/32/);
    expect(payloadOptionsFromEnv({})).toEqual({});
  });
});
