/**
 * @module postgres/listen
 * Internal: not part of the public API.
 * Wake-ups over LISTEN/NOTIFY: which channel an event travels on (`<schema>_wake` for work,
 * `<schema>_done` for finished tasks), sending one, and subscribing to a topic on a dedicated
 * connection (the reconnecting listener itself is in wake.ts).
 *
 * A listening connection names its channel in its `application_name` ({@link listenerName}), so
 * that a write can send its NOTIFY only when some connection listens on that channel
 * ({@link notifySql}): a NOTIFY makes its transaction take PostgreSQL's notification queue lock
 * at commit, which serialises committers, and nobody would hear it. A listener that connects
 * while such a write runs may miss it; every waiter also polls, so it is late, not lost.
 */
import type { Client } from 'pg';
import { poolOf, run, type PgContext } from './connection.ts';
import { WakeListener } from './wake.ts';
import { clientSettings } from './deadlines.ts';

/** How often an idle LISTEN connection is checked (a dead peer sends no error on a silent network). */
const LISTEN_PING_MS = 10_000;
import { ClosedError } from '../errors.ts';
import type { WakeEvent, WakeTopic } from '../store.ts';
import { topicOf } from '../store.ts';

export async function notify(c: PgContext, event: WakeEvent): Promise<void> {
  const channel = channelOf(c, event);
  await run(c, () => poolOf(c).query(`SELECT ${notifySql('$1::text', '$2::text', '$3::text')}`, [channel, JSON.stringify(event), listenerName(channel)]));
}

const LISTENER_PREFIX = 'stepwise-listen ';

/**
 * The `application_name` of the connections that LISTEN on `channel`: a fixed prefix and a hash
 * of the channel (names are limited to 63 bytes; a collision only sends a NOTIFY nobody needed).
 */
export function listenerName(channel: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < channel.length; i++) h = Math.imul(h ^ channel.charCodeAt(i), 0x01000193) >>> 0;
  return `${LISTENER_PREFIX}${h.toString(16).padStart(8, '0')}`;
}

/**
 * The names of the open listening connections (see {@link listenerName}), as one array. It does not
 * refer to the statement's rows, so PostgreSQL reads `pg_stat_activity` once per statement (an
 * InitPlan), not once per row of a batch: each read copies the status of every backend.
 */
const LISTENERS_SQL = `ARRAY(SELECT application_name FROM pg_stat_activity WHERE application_name LIKE '${LISTENER_PREFIX}%')`;

/**
 * A SQL expression that sends `payload` on `channel` if a connection named `listener` (see
 * {@link listenerName}) is open, else NULL: arguments are SQL expressions of type text.
 */
export function notifySql(channel: string, payload: string, listener: string): string {
  return `CASE WHEN ${payload} IS NOT NULL AND ${listener} = ANY(${LISTENERS_SQL}) THEN pg_notify(${channel}, ${payload}) END`;
}

/** The channel an event travels on (see {@link topicOf}). */
export function channelOf(c: PgContext, event: WakeEvent | undefined): string {
  return topicChannel(c, event ? topicOf(event) : 'work');
}

function topicChannel(c: PgContext, topic: WakeTopic): string {
  return topic === 'settled' ? c.settledChannel : c.channel;
}

/**
 * LISTENs to one topic's channel on a dedicated connection (not from the pool). If it drops, it
 * reconnects with backoff and then calls `listener` once with `taskId: '*'` (reason `'task'`, or
 * `'settled'` for that topic), since notifications sent while it was down are lost. Throws if the
 * first connection fails.
 */
export async function subscribe(c: PgContext, listener: (event: WakeEvent) => void, topic: WakeTopic = 'work'): Promise<() => Promise<void>> {
  if (!c.pool) throw new ClosedError('The PostgreSQL store');
  const channel = topicChannel(c, topic);
  const missed: WakeEvent = { reason: topic === 'settled' ? 'settled' : 'task', taskId: '*' };
  const connect = (): Client => new c.pg.Client(clientSettings(c.url, c.deadlines, listenerName(channel)));
  const l = new WakeListener(connect, channel, missed, listener, Math.min(LISTEN_PING_MS, c.deadlines.statementTimeoutMs));
  c.listeners.add(l);
  try {
    await run(c, () => l.start());
  } catch (e) {
    c.listeners.delete(l);
    await l.stop();
    throw e;
  }
  return async () => {
    c.listeners.delete(l);
    await l.stop();
  };
}
