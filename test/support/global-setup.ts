// Runs once before the suite: reports whether PostgreSQL is reachable, so that skipped suites are
// visible, and makes an unreachable PostgreSQL an error under CI=true.
import { postgresAvailability } from './postgres.ts';

export default async function setup(): Promise<void> {
  const pg = await postgresAvailability();
  if (pg.ok) {
    console.log(`[stepwise tests] PostgreSQL reachable at ${pg.url}: PostgreSQL suites will run.`);
    return;
  }
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(`[stepwise tests] CI=true but PostgreSQL is not reachable at ${pg.url} (${pg.reason}). .ci/run must start it.`);
  }
  console.warn(
    `\n[stepwise tests] PostgreSQL is NOT reachable at ${pg.url} (${pg.reason}).\n` +
      '[stepwise tests] SKIPPING the PostgreSQL suites (store conformance on postgres, multi-worker, chaos).\n' +
      '[stepwise tests] Set STEPWISE_TEST_PG_URL or start PostgreSQL to run them.\n',
  );
}
