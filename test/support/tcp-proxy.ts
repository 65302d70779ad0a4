// A TCP forwarder between a worker and PostgreSQL that a test can cut and restore, to simulate
// the database (or the network to it) going away while connections are open. Two ways to fail:
// - `cut()`: every connection is closed (the peer sees a reset or an end) and new ones refused;
// - `blackhole()`: packets are dropped silently, as on a partitioned network: open connections
//   stay open but nothing goes through either way (not even a FIN), and new connections are
//   accepted (the SYN is answered) but nothing is ever forwarded on them. `restore()` then lets the
//   held bytes through, as TCP retransmission would once the network is back.
// - `sever()`: the database side of every open connection is closed (PostgreSQL ends those
//   backends, as in a restart or failover) but the client side stays open and silent forever
//   (half-open: a NAT or load balancer that forgot the connection drops its packets without a
//   reset); new connections are refused until `restore()`.
import net from 'node:net';

export interface TcpProxy {
  port: number;
  /** Drops every open connection and refuses new ones until `restore()`. */
  cut(): void;
  /** Stops forwarding in both directions without closing anything, until `restore()`. */
  blackhole(): void;
  /** Ends the database side of every open connection, leaving the client side open and silent. */
  sever(): void;
  /** The local ports of the connections to the database now (PostgreSQL's `client_port`). */
  upstreamPorts(): number[];
  restore(): void;
  close(): Promise<void>;
  /** Connections accepted so far. */
  readonly accepted: number;
  /**
   * The `application_name` each accepted connection sent in its start-up message, in order (read
   * even while blackholed, as a kernel would buffer it; nothing is forwarded then).
   */
  readonly names: readonly string[];
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
  /** Bytes from the client not yet forwarded (before the upstream exists, or while blackholed). */
  held: Buffer[];
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  const severed = new Set<net.Socket>();
  let mode: 'up' | 'cut' | 'blackhole' = 'up';
  let accepted = 0;
  const names: string[] = [];

  const drop = (pair: Pair): void => {
    pair.client.destroy();
    pair.upstream?.destroy();
    pairs.delete(pair);
  };
  const connectUpstream = (pair: Pair): void => {
    const upstream = net.connect({ port: targetPort, host: targetHost, allowHalfOpen: true });
    pair.upstream = upstream;
    upstream.on('error', () => drop(pair)).on('close', () => drop(pair));
    upstream.on('data', (chunk: Buffer) => {
      if (!pair.client.write(chunk)) upstream.pause();
    });
    pair.client.on('drain', () => mode === 'up' && upstream.resume());
    upstream.on('end', () => pair.client.end());
    for (const chunk of pair.held.splice(0)) upstream.write(chunk);
  };
  // While blackholed, sockets are paused: nothing is read, so neither data nor an end passes.
  const pause = (pair: Pair): void => {
    pair.client.pause();
    pair.upstream?.pause();
  };
  const resume = (pair: Pair): void => {
    if (!pair.upstream) connectUpstream(pair);
    pair.client.resume();
    pair.upstream?.resume();
  };

  // allowHalfOpen: a client's end is forwarded as such (and, blackholed, not answered at all).
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (client) => {
    if (mode === 'cut') {
      client.destroy();
      return;
    }
    accepted++;
    const pair: Pair = { client, upstream: null, held: [] };
    pairs.add(pair);
    client.on('error', () => drop(pair)).on('close', () => drop(pair));
    client.once('data', (chunk: Buffer) => names.push(applicationName(chunk)));
    client.on('data', (chunk: Buffer) => {
      if (!pair.upstream) pair.held.push(chunk);
      else if (!pair.upstream.write(chunk)) client.pause();
    });
    client.on('end', () => (pair.upstream ? pair.upstream.end() : drop(pair)));
    if (mode === 'up') resume(pair);
    else client.resume(); // blackholed: its bytes are held, not forwarded
  });
  server.on('connection', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get accepted() {
      return accepted;
    },
    get names() {
      return names;
    },
    cut() {
      mode = 'cut';
      for (const pair of [...pairs]) drop(pair);
    },
    blackhole() {
      mode = 'blackhole';
      for (const pair of pairs) pause(pair);
    },
    sever() {
      mode = 'cut';
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        const { client, upstream } = pair;
        client.removeAllListeners('data').removeAllListeners('end').removeAllListeners('close');
        client.on('data', () => undefined).on('error', () => undefined);
        client.resume();
        severed.add(client);
        upstream
          ?.removeAllListeners('close')
          .removeAllListeners('end')
          .removeAllListeners('data')
          .on('error', () => undefined);
        upstream?.destroy();
      }
    },
    upstreamPorts() {
      return [...pairs].flatMap((p) => (p.upstream?.localPort ? [p.upstream.localPort] : []));
    },
    restore() {
      mode = 'up';
      for (const pair of pairs) resume(pair);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const pair of [...pairs]) drop(pair);
        for (const client of severed) client.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The `application_name` of a PostgreSQL start-up message (`''` if it is not one). */
function applicationName(chunk: Buffer): string {
  const fields = chunk.subarray(8).toString('utf8').split('\0');
  const i = fields.indexOf('application_name');
  return i >= 0 && i + 1 < fields.length ? (fields[i + 1] ?? '') : '';
}
