/**
 * @module postgres/wake
 * Internal: not part of the public API (the package exports only its index modules).
 * Wake-ups across processes: the NOTIFY payload of a write, and one LISTEN connection (outside
 * the pool) that survives drops: it reconnects with backoff, re-subscribes, and then tells its
 * listener to look again once (`taskId: '*'`), since notifications sent while it was down are lost.
 */
import type { Client, Notification } from 'pg';
import { quoteIdent } from './migrate.ts';
import { destroySocket, endClient } from './deadlines.ts';
import type { WakeEvent } from '../store.ts';

/** Reconnect delays of the LISTEN connection: doubles from the first to the last. */
const RECONNECT_MS = { first: 100, max: 5000 } as const;

/** One LISTEN connection that survives drops. */
export class WakeListener {
  readonly #connect: () => Client;
  readonly #channel: string;
  readonly #missed: WakeEvent;
  readonly #listener: (event: WakeEvent) => void;
  #client: Client | null = null;
  #stopped = false;
  #timer: NodeJS.Timeout | null = null;
  #delayMs: number = RECONNECT_MS.first;
  readonly #pingMs: number;
  #pinger: NodeJS.Timeout | null = null;

  /**
   * `missed`: what the listener is told after a reconnect (an event with `taskId: '*'`);
   * `pingMs`: how often the connection is checked with a statement (whose client-side deadline
   * comes from `connect`'s settings): on a network that drops packets, an idle connection never
   * hears that its peer is gone, so a check that gets no answer drops it and reconnects.
   */
  constructor(connect: () => Client, channel: string, missed: WakeEvent, listener: (event: WakeEvent) => void, pingMs = 10_000) {
    this.#connect = connect;
    this.#channel = channel;
    this.#missed = missed;
    this.#listener = listener;
    this.#pingMs = pingMs;
  }

  /** The LISTEN connection open now, if any. */
  get connection(): Client | null {
    return this.#client;
  }

  async start(): Promise<void> {
    await this.#open();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#pinger) clearInterval(this.#pinger);
    this.#pinger = null;
    const client = this.#client;
    this.#client = null;
    if (client) await endClient(client);
  }

  /** Checks the connection every `pingMs`; one that does not answer is dropped (then reconnected). */
  #watch(client: Client): void {
    if (this.#pinger) clearInterval(this.#pinger);
    let pinging = false;
    this.#pinger = setInterval(() => {
      if (this.#client !== client) {
        clearInterval(this.#pinger as NodeJS.Timeout);
        return;
      }
      if (pinging) return;
      pinging = true;
      client.query('SELECT 1').then(
        () => void (pinging = false),
        () => {
          pinging = false;
          destroySocket(client); // 'end' follows, which schedules the reconnect
        },
      );
    }, this.#pingMs);
    this.#pinger.unref();
  }

  async #open(): Promise<void> {
    const client = this.#connect();
    // 'error' precedes 'end' when the connection drops; 'end' schedules the reconnect.
    client.on('error', () => undefined);
    client.on('notification', (msg: Notification) => {
      if (msg.channel === this.#channel) this.#deliver(parseWakeEvent(msg.payload));
    });
    client.on('end', () => {
      if (this.#client !== client) return;
      this.#client = null;
      this.#scheduleReconnect();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${quoteIdent(this.#channel)}`);
    } catch (e) {
      await endClient(client);
      throw e;
    }
    if (this.#stopped) {
      await endClient(client);
      return;
    }
    this.#client = client;
    this.#watch(client);
  }

  #scheduleReconnect(): void {
    if (this.#stopped || this.#timer) return;
    const delay = this.#delayMs;
    this.#delayMs = Math.min(this.#delayMs * 2, RECONNECT_MS.max);
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#open().then(
        () => {
          if (this.#stopped) return;
          this.#delayMs = RECONNECT_MS.first;
          // Notifications sent while disconnected are lost: tell the listener to look again.
          this.#deliver(this.#missed);
        },
        () => this.#scheduleReconnect(),
      );
    }, delay);
  }

  #deliver(event: WakeEvent | null): void {
    if (!event || this.#stopped) return;
    try {
      this.#listener(event);
    } catch {
      // A listener's failure is its own; the connection keeps listening.
    }
  }
}

/** The NOTIFY payload of a wake-up (at most a few hundred bytes: ids, names, a short reason). */
export function payload(event: WakeEvent | undefined): string | null {
  if (!event) return null;
  const text = JSON.stringify(event);
  return text.length < 7900 ? text : JSON.stringify({ ...event, cancelReason: null });
}

export function parseWakeEvent(payload: string | undefined): WakeEvent | null {
  if (!payload) return null;
  try {
    const v = JSON.parse(payload) as Partial<WakeEvent> | null;
    if (!v || typeof v.reason !== 'string' || typeof v.taskId !== 'string') return null;
    const event: WakeEvent = { reason: v.reason, taskId: v.taskId };
    if (typeof v.workflow === 'string') event.workflow = v.workflow;
    if (typeof v.cancelReason === 'string') event.cancelReason = v.cancelReason;
    if (Array.isArray(v.taskIds) && v.taskIds.every((id) => typeof id === 'string')) event.taskIds = v.taskIds;
    if (typeof v.origin === 'string') event.origin = v.origin;
    return event;
  } catch {
    return null;
  }
}
