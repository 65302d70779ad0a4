import { defineConfig } from 'vitest/config';
import { postgresAvailability } from './test/support/postgres.ts';

// One run covers everything: unit tests, SQLite tests (a temp file per test), the store
// conformance suite on both stores, the PostgreSQL multi-worker and chaos tests, and the engine
// suites a second time on PostgreSQL (a fresh schema per test). Without a reachable PostgreSQL
// the PostgreSQL parts are skipped with a message (test/support/global-setup.ts); under CI=true
// that is an error.
const pg = await postgresAvailability();

const ENGINE_SUITES = ['test/engine.*.test.ts', 'test/worker.lease.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Tests spawn worker processes and share a 2-core machine: keep parallelism modest.
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
    projects: [
      { extends: true, test: { name: 'main', include: ['test/**/*.test.ts'] } },
      ...(pg.ok ? [{ extends: true as const, test: { name: 'engine-on-postgres', include: ENGINE_SUITES, env: { STEPWISE_TEST_STORE: 'postgres' } } }] : []),
    ],
  },
});
