// The payload store survives a worker killed with SIGKILL in the middle of a blob write: after the
// blob's bytes are in the backend and before its row (payloads:bytes-stored), and after a write's
// blob rows commit and before the checkpoint that refers to them (payloads:blobs-written). The task
// resumes on another worker and ends with the whole transcript; every recorded value reads back
// (no reference without its bytes); and once the task is deleted, collection leaves no blob, row
// or file behind. Real processes, on SQLite and (when reachable) PostgreSQL.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Engine, directoryBackend } from '../src/index.ts';
import { openStore } from '../src/store-url.ts';
import { payloadChat, turnMessage } from './fixtures/payload-workflows.ts';
import { FAST, eventually, schemasOfThisFile, tempDir } from './support/engine.ts';
import { PG_URL, hasPostgres } from './support/postgres.ts';

const pgUp = await hasPostgres();
const freshSchema = schemasOfThisFile('sw_crash_payloads');
const stores = [{ name: 'SQLite', url: () => `sqlite:${join(tempDir(), 'payloads.db')}` }, ...(pgUp ? [{ name: 'PostgreSQL', url: () => `${PG_URL}?schema=${freshSchema()}` }] : [])];
if (!pgUp) console.warn('[stepwise tests] PostgreSQL is not reachable: the PostgreSQL crash tests of the payload store are skipped.');

function spawnWorker(env: Record<string, string>): { exited: Promise<NodeJS.Signals | null>; output: () => string } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/payload-worker.ts'], {
    cwd: new URL('..', import.meta.url).pathname,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  setTimeout(() => child.kill('SIGKILL'), 60_000).unref();
  return { exited, output: () => out };
}

const TURNS = 6;
const cases = [
  { point: 'payloads:blobs-written', backend: 'database' },
  { point: 'payloads:blobs-written', backend: 'directory' },
  { point: 'payloads:bytes-stored', backend: 'directory' },
] as const;

describe.each(stores)('payload store on $name (real processes, SIGKILL)', ({ url: makeUrl }) => {
  it.each(cases)(
    'a worker killed at $point ($backend) loses nothing and leaves no dangling reference',
    async ({ point, backend }) => {
      const url = makeUrl();
      const dir = backend === 'directory' ? tempDir() : null;
      // Collection spares what was written in the last second (a write in flight of the resumed worker).
      const payloads = { collectAfter: '1s', ...(dir ? { backend: directoryBackend(dir) } : {}) };
      const engine = new Engine({ store: url, workflows: [payloadChat], payloads });
      try {
        const { id } = await engine.start(payloadChat, { turns: TURNS });
        const dying = spawnWorker({ STEPWISE_DB: url, STEPWISE_TEST_KILL_AT: point, ...(dir ? { PAYLOAD_DIR: dir } : {}) });
        const signal = await dying.exited;
        expect(signal, `the worker should die at ${point}; its output:\n${dying.output()}`).toBe('SIGKILL');

        const worker = engine.worker({ ...FAST, leaseMs: 1500, retentionSweepMs: 50 });
        await worker.start();
        const expected = Array.from({ length: 2 * TURNS }, (_, i) => turnMessage(i));
        expect(await engine.result(id, { timeout: '60s' })).toEqual(expected);
        const info = await engine.get(id, { steps: true });
        expect(info.runs).toBeGreaterThanOrEqual(2);
        // Every checkpoint reads back whole (a reference without its bytes would throw PAYLOAD_UNREADABLE).
        const turns = (info.steps ?? []).filter((s) => s.name.startsWith('turn'));
        expect(turns).toHaveLength(TURNS);
        turns.forEach((s, t) => expect(s.output).toEqual(expected.slice(0, 2 * (t + 1))));

        await engine.delete(id);
        const store = await openStore(url, {});
        try {
          await eventually(async () => (await store.blobUsage()).blobs === 0, 15_000, 'every blob collected');
          expect((await store.blobUsage()).holdings).toBe(0);
        } finally {
          await store.close();
        }
        if (dir) {
          // Including bytes the killed worker stored before any row named them.
          const left = () => readdirSync(dir).flatMap((d) => (existsSync(join(dir, d)) ? readdirSync(join(dir, d)) : []));
          await eventually(() => left().length === 0, 15_000, 'every file deleted');
        }
        await worker.stop();
      } finally {
        await engine.close();
      }
    },
    90_000,
  );
});
