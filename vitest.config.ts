import { defineConfig } from 'vitest/config';

// One run covers everything: unit tests, SQLite tests (a temp file per test) and PostgreSQL tests
// (a fresh schema per test file). PostgreSQL suites skip with a message when no server is
// reachable, and fail instead when CI=true.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Tests spawn worker processes and share a 2-core machine: keep parallelism modest.
    maxWorkers: 2,
    globalSetup: ['test/support/global-setup.ts'],
  },
});
