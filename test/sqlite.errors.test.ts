// SQLite-specific failure paths of the embedded store.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Engine, isStepwiseError, workflow } from '../src/index.ts';
import { tempDir } from './support/engine.ts';

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
});
