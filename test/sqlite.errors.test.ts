// SQLite-specific failure paths of the embedded store.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Engine, isStepwiseError, workflow } from '../src/index.ts';
import { closeSync, existsSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { eventually, tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';
import { triple } from './fixtures/crash-workflows.ts';

describe('SQLite store errors', () => {
  it('reports a file locked past the busy timeout as STORE_UNAVAILABLE and corrupts nothing', async () => {
    const file = join(tempDir(), 'locked.db');
    const wf = workflow('w', async () => 1);
    const engine = new Engine({ store: `sqlite:${file}?busyTimeoutMs=50`, workflows: [wf] });
    try {
      const { id } = await engine.start('w', {});
      const other = new Database(file);
      other.prepare('BEGIN IMMEDIATE').run(); // another process holds the write lock
      try {
        const err = await engine.start('w', {}).catch((e: unknown) => e);
        expect(isStepwiseError(err, 'STORE_UNAVAILABLE')).toBe(true);
        expect((err as Error & { retryable: boolean }).retryable).toBe(true);
        expect((err as Error).message).toMatch(/SQLITE_BUSY/);
      } finally {
        other.prepare('ROLLBACK').run();
        other.close();
      }
      // The lock is gone: the engine works again and the earlier task is intact.
      expect((await engine.get(id)).status).toBe('pending');
      expect((await engine.start('w', {})).created).toBe(true);
    } finally {
      await engine.close();
    }
  });

  it('refuses a database created from a different schema text with SCHEMA_MISMATCH', async () => {
    const file = join(tempDir(), 'old.db');
    const db = new Database(file);
    db.exec(`CREATE TABLE stepwise_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, breaking INTEGER NOT NULL, applied_at INTEGER NOT NULL);
      INSERT INTO stepwise_migrations VALUES (1, 'init', 0, 0);`);
    db.close();
    const engine = new Engine({ store: `sqlite:${file}` });
    try {
      await expect(engine.list()).rejects.toMatchObject({ code: 'SCHEMA_MISMATCH' });
    } finally {
      await engine.close();
    }
  });

  it('refuses to open a database whose -wal file vanished while a worker had it open, instead of serving an older state', async () => {
    const file = join(tempDir(), 'lost-wal.db');
    const db = `sqlite:${file}`;
    const first = new Engine({ store: db, workflows: [triple] });
    const w = spawnCli(['worker', 'test/fixtures/crash-workflows.ts', '--db', db, '--poll-ms', '50']);
    let id: string;
    try {
      await first.ready();
      await eventually(() => w.output().includes('started; workflows'), 20_000, 'worker start');
      ({ id } = await first.start(triple, { n: 1 }));
      expect(await first.result(id, { timeout: '30s' })).toBe(6);
    } finally {
      await first.close();
    }
    // The worker still has the database open: its commits are in the -wal file, not yet in the
    // main file. Someone removes the -wal (a cleanup script, a copy of the .db alone).
    expect(existsSync(`${file}-wal`)).toBe(true);
    unlinkSync(`${file}-wal`);
    const refusal = async (): Promise<unknown> => {
      const engine = new Engine({ store: db, workflows: [triple] });
      try {
        return await engine.ready().then(
          () => null,
          (e: unknown) => e,
        );
      } finally {
        await engine.close();
      }
    };
    try {
      // While the worker still runs, and after it died without a checkpoint (SIGKILL): either
      // way the commits it made are gone from what a new process would read.
      for (const when of ['worker running', 'worker killed']) {
        if (when === 'worker killed') {
          w.child.kill('SIGKILL');
          await w.exited;
        }
        const error = await refusal();
        expect({ when, code: (error as { code?: unknown } | null)?.code }).toEqual({ when, code: 'STORE_DAMAGED' });
        expect((error as Error).message).toContain(`${file}-wal`);
        expect((error as Error).message).toMatch(/lost its write-ahead log/);
      }
    } finally {
      w.child.kill('SIGKILL');
      await w.exited;
    }
    // What the message says to do to accept the older state works: the task started above is gone.
    unlinkSync(`${file}-shm`);
    const older = new Engine({ store: db, workflows: [triple] });
    try {
      expect(isStepwiseError(await older.get(id).catch((e: unknown) => e), 'TASK_NOT_FOUND')).toBe(true);
    } finally {
      await older.close();
    }
  }, 60_000);

  it('stops with STORE_DAMAGED when -wal and -shm are removed under a running engine, instead of reporting commits a reopen would lose', async () => {
    const file = join(tempDir(), 'removed.db');
    const wf = workflow('w', async (ctx) => ctx.step('one', async () => 1));
    const engine = new Engine({ store: `sqlite:${file}`, workflows: [wf] });
    const worker = engine.worker({ pollIntervalMs: 20 });
    const errors: unknown[] = [];
    worker.on('worker:error', (e) => errors.push(e.error));
    try {
      await worker.start();
      const { id } = await engine.start('w', {});
      expect(await engine.result(id, { timeout: '20s' })).toBe(1);
      // A cleanup script removes both files: to a process opening the database next, this looks
      // like a clean shutdown, and every commit still in the -wal is gone.
      unlinkSync(`${file}-wal`);
      unlinkSync(`${file}-shm`);
      const refused = await engine.start('w', {}).catch((e: unknown) => e);
      expect(isStepwiseError(refused, 'STORE_DAMAGED')).toBe(true);
      expect((refused as Error & { retryable: boolean }).retryable).toBe(false);
      expect((refused as Error).message).toContain(`${file}-wal was removed`);
      expect((refused as Error).message).toMatch(/restore/);
      // Every later write fails the same way (the worker's claims included): nothing more is
      // committed into files nobody will read again.
      expect(isStepwiseError(await engine.start('w', {}).catch((e: unknown) => e), 'STORE_DAMAGED')).toBe(true);
      await eventually(() => errors.some((e) => isStepwiseError(e, 'STORE_DAMAGED')), 10_000, 'the worker to meet STORE_DAMAGED');
    } finally {
      await worker.stop();
      await engine.close();
    }
  }, 30_000);

  it('stops with STORE_DAMAGED when the database file is replaced under a running engine', async () => {
    const dir = tempDir();
    const file = join(dir, 'replaced.db');
    const wf = workflow('w', async () => 1);
    const engine = new Engine({ store: `sqlite:${file}`, workflows: [wf] });
    try {
      await engine.start('w', {});
      // A restore copies another database over the path (a new file under the same name).
      const other = new Database(join(dir, 'other.db'));
      other.exec('CREATE TABLE t (a)');
      other.close();
      unlinkSync(file);
      new Database(file).close();
      const refused = await engine.start('w', {}).catch((e: unknown) => e);
      expect(isStepwiseError(refused, 'STORE_DAMAGED')).toBe(true);
      expect((refused as Error).message).toContain(`${file} was replaced by another file`);
    } finally {
      await engine.close();
    }
  });

  it('reports a corrupt page met by a list as STORE_DAMAGED with the path and what to do', async () => {
    const file = join(tempDir(), 'corrupt.db');
    const wf = workflow('w', async () => 1);
    const writer = new Engine({ store: `sqlite:${file}`, workflows: [wf] });
    await writer.startMany(Array.from({ length: 400 }, () => ({ workflow: 'w', input: { text: 'x'.repeat(200) } })));
    await writer.close();
    // Overwrite the pages of the tasks table's B-tree (not the schema, not the migrations table).
    const db = new Database(file);
    db.pragma('wal_checkpoint(TRUNCATE)');
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const root = (db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'stepwise_tasks'").get() as { rootpage: number }).rootpage;
    db.close();
    const fd = openSync(file, 'r+');
    writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (root - 1) * pageSize);
    closeSync(fd);
    const reader = new Engine({ store: `sqlite:${file}`, workflows: [wf] });
    try {
      const error = await reader.list({ limit: 1000 }).catch((e: unknown) => e);
      expect(isStepwiseError(error, 'STORE_DAMAGED')).toBe(true);
      expect((error as Error).message).toContain(file);
      expect((error as Error).message).toMatch(/integrity_check/);
    } finally {
      await reader.close();
    }
  });
});
