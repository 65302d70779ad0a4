// Helpers for the idempotency tests: a process that owns a key until it is SIGKILLed, and an
// observer that collects idempotency events.
import { spawn } from 'node:child_process';
import { afterEach } from 'vitest';
import type { IdempotencyEvent, Observer } from '../../src/index.ts';
import { eventually } from './engine.ts';

const killed: Array<() => void> = [];
afterEach(() => {
  for (const k of killed.splice(0)) k();
});

/**
 * Starts a process that takes `key` (on the store `db`, or on Redis) and never finishes, waits until
 * it owns the record, SIGKILLs it, and resolves with its pid once it is dead.
 */
export async function ownerKilledWhileRunning(env: { db: string; key: string; leaseMs: number; redis?: { url: string; prefix: string } }): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/fixtures/idempotency-owner.ts'], {
    cwd: new URL('../..', import.meta.url).pathname,
    env: {
      ...process.env,
      STEPWISE_TEST_DB: env.db,
      STEPWISE_TEST_KEY: env.key,
      STEPWISE_TEST_LEASE_MS: String(env.leaseMs),
      ...(env.redis ? { STEPWISE_TEST_REDIS: env.redis.url, STEPWISE_TEST_REDIS_PREFIX: env.redis.prefix } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killed.push(() => child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
  await eventually(() => out.includes(`owner running ${child.pid}`), 30_000, `the owner process to run its operation (output: ${out})`);
  child.kill('SIGKILL');
  const signal = await exited;
  if (signal !== 'SIGKILL') throw new Error(`owner process ended with ${signal}: ${out}`);
  return child.pid as number;
}

/** An observer that keeps every idempotency event. */
export function collectIdempotency(): { observer: Observer; events: IdempotencyEvent[] } {
  const events: IdempotencyEvent[] = [];
  return { observer: { name: 'idempotency-events', onIdempotency: (e) => void events.push(e) }, events };
}
