// Redis for tests: where it is and whether it answers. Without it the Redis tests are skipped with
// a message; under CI=true (where .ci/run starts Redis) that is an error.
import { Redis } from 'ioredis';

export const REDIS_URL = process.env.STEPWISE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export async function redisAvailability(): Promise<{ ok: boolean; reason?: string }> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2000, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.ping();
    return { ok: true };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  } finally {
    client.disconnect();
  }
}

/** Whether the Redis tests run; logs why not, and throws under CI. */
export async function hasRedis(): Promise<boolean> {
  const a = await redisAvailability();
  if (a.ok) return true;
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(`[stepwise tests] CI=true but Redis is not reachable at ${REDIS_URL} (${a.reason}). .ci/run must start it.`);
  }
  console.warn(
    `\n[stepwise tests] Redis is NOT reachable at ${REDIS_URL} (${a.reason}): SKIPPING the Redis idempotency tests. Set STEPWISE_TEST_REDIS_URL or start redis-server to run them.\n`,
  );
  return false;
}
