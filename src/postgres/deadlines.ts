/**
 * @module postgres/deadlines
 * Internal: not part of the public API.
 * How long any call to PostgreSQL may take, so that a network that drops packets without a reset
 * (a partition, a dead host, a firewall that forgets the connection) fails calls instead of
 * wedging them. Four layers, each catching what the previous one cannot:
 * - a connection timeout: a server that accepts TCP but never completes the start-up;
 * - `statement_timeout` and `idle_in_transaction_session_timeout`, on the server: a statement
 *   that runs too long, a transaction whose client went away, are ended by PostgreSQL itself;
 * - TCP keepalive: an idle connection to a peer that vanished is found dead by the kernel;
 * - a client-side deadline a little past the statement timeout: a statement whose answer never
 *   arrives (the server cancelled it, but the network lost the answer) fails, and its connection is
 *   destroyed, since it is in an unknown state.
 */
import type { Client, ClientConfig } from 'pg';
import { InvalidArgumentError } from '../errors.ts';

export interface PgDeadlines {
  /** Opening a connection, through authentication. */
  connectTimeoutMs: number;
  /** One statement on the server; the client waits this plus {@link CLIENT_MARGIN_MS}. */
  statementTimeoutMs: number;
}

export const DEFAULT_DEADLINES: Readonly<PgDeadlines> = Object.freeze({ connectTimeoutMs: 10_000, statementTimeoutMs: 30_000 });

/** How long past the server's statement timeout the client waits for the answer (its cancel). */
export const CLIENT_MARGIN_MS = 2000;
/** Idle time before the kernel starts probing a connection. */
const KEEPALIVE_IDLE_MS = 10_000;
/** The error message of the client-side deadline (pg's own, matched in connection.ts). */
export const CLIENT_DEADLINE_MESSAGE = 'Query read timeout';

/** Checks one deadline option (from the URL or the store's options). */
export function checkDeadline(name: keyof PgDeadlines, value: unknown, where: string): number {
  const ms = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 1 || ms > 86_400_000) {
    throw new InvalidArgumentError(`${name}=${String(value)} ${where}: use a whole number of milliseconds from 1 to 86400000`);
  }
  return ms;
}

/** The driver settings that enforce `d` on every connection (pooled, LISTEN, migration). */
export function clientSettings(url: string, d: PgDeadlines, applicationName: string): ClientConfig {
  return {
    connectionString: url,
    application_name: applicationName,
    connectionTimeoutMillis: d.connectTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    statement_timeout: d.statementTimeoutMs,
    idle_in_transaction_session_timeout: d.statementTimeoutMs,
    query_timeout: d.statementTimeoutMs + CLIENT_MARGIN_MS,
  };
}

/**
 * Ends a client, and destroys its socket if the end is not acknowledged within `ms`: on a network
 * that drops packets the goodbye is never answered, and a socket left open would keep the
 * process alive.
 */
export async function endClient(client: Client, ms = 1000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().catch(() => undefined);
  const forced = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      destroySocket(client);
      resolve();
    }, ms);
    timer.unref();
  });
  await Promise.race([ended, forced]);
  clearTimeout(timer);
}

/** Destroys a client's socket at once (its 'end' and 'error' events follow). */
export function destroySocket(client: unknown): void {
  const stream = (client as { connection?: { stream?: { destroy?: () => void } } }).connection?.stream;
  stream?.destroy?.();
}
