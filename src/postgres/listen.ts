/**
 * @module postgres/listen
 * Internal: not part of the public API.
 * Wake-ups over LISTEN/NOTIFY: which channel an event travels on (`<schema>_wake` for work,
 * `<schema>_done` for finished tasks), sending one, and subscribing to a topic on a dedicated
 * connection (the reconnecting listener itself is in wake.ts).
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
  await run(c, () => poolOf(c).query('SELECT pg_notify($1, $2)', [channelOf(c, event), JSON.stringify(event)]));
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
  const connect = (): Client => new c.pg.Client(clientSettings(c.url, c.deadlines, 'stepwise-listen'));
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
