// `npm run bench`, (t) token streams in the browser's protocol (issue 32): a task's model step
// streams a chat completion from the stamped model (bench/stream-model.ts), whose every chunk
// carries the wall-clock time it was written; a client reads `GET /api/tasks/:id/stream` over
// real HTTP (fetch, as a browser's EventSource does) and notes when each chunk's frame arrives.
// - latency: chunk written by the model → its SSE message parsed by the client, p50 / p99, over
//   live frames only (a chunk written before the client's stream opened is a replay, not counted).
//   The worker in the server's process, or in a process of its own (`stepwise worker`), the
//   frames then reaching the server through the store (NOTIFY on PostgreSQL).
// - throughput: one task whose model writes 5,000 chunks as fast as it can; frames and chunks per
//   second the client receives, from its first frame to its last.
// - memory: a server process (engine, worker and HTTP server) streaming one task to 500 clients:
//   its heap and RSS after a full GC with none, with all 500 receiving, and after they left.
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../dist/index.js';
import { readSse } from '../dist/client/sse.js';
import { serveApi } from './serve-api.ts';
import { streamStamps } from './workflows.ts';
import { startStampModel, wallMs, type StampModel } from './stream-model.ts';
import { fmt, median, percentile, root, spawnWorker, stopWorkers, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

const TOKEN = 'bench-stream-token';

interface Reading {
  /** Latencies of the live chunks, ms. */
  latencies: number[];
  frames: number;
  chunks: number;
  firstAt: number;
  lastAt: number;
}

/** Reads a task's stream until it ends (or `signal` aborts), timing every chunk's frame. */
async function readStream(url: string, signal?: AbortSignal, onFrame?: () => void): Promise<Reading> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` }, signal });
  if (res.status !== 200) throw new Error(`bench (t): ${url} answered ${res.status}: ${await res.text()}`);
  const openedAt = wallMs();
  const r: Reading = { latencies: [], frames: 0, chunks: 0, firstAt: 0, lastAt: 0 };
  try {
    for await (const m of readSse(res.body as ReadableStream<Uint8Array>)) {
      if (m.event !== 'stream:delta') continue;
      const at = wallMs();
      r.frames++;
      r.firstAt ||= at;
      r.lastAt = at;
      onFrame?.();
      for (const stamp of (JSON.parse(m.data) as { delta: string }).delta.split(';')) {
        if (!stamp) continue;
        r.chunks++;
        if (Number(stamp) >= openedAt) r.latencies.push(at - Number(stamp));
      }
    }
  } catch (e) {
    if (!signal?.aborted) throw e;
  }
  return r;
}

interface Setup {
  engine: Engine;
  base: string;
  close(): Promise<void>;
}

/** An engine with the HTTP API on a free port, and the worker in this process or in its own. */
async function setUp(url: string, where: 'in-process' | 'cross-process'): Promise<Setup> {
  const engine = new Engine({ store: url, workflows: [streamStamps] });
  await engine.ready();
  const worker = where === 'in-process' ? engine.worker({ concurrency: 8 }) : null;
  await worker?.start();
  const child = where === 'cross-process' ? spawnWorker(url) : null;
  const api = await serveApi(engine, TOKEN);
  return {
    engine,
    base: api.base,
    async close() {
      await api.close();
      await worker?.stop();
      if (child) await stopWorkers([child]);
      await engine.close();
    },
  };
}

/** One task streaming `model`, read from its start: the reading, and the task's own length check. */
async function streamOne(s: Setup, model: StampModel, spec: string): Promise<Reading> {
  const { id } = await s.engine.start(streamStamps, { baseURL: model.baseURL, model: spec });
  const reading = await readStream(`${s.base}/api/tasks/${id}/stream`);
  await s.engine.result(id, { timeout: '60s' });
  return reading;
}

export interface StreamLatency {
  store: string;
  worker: 'in-process' | 'cross-process';
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

export interface StreamThroughput {
  store: string;
  framesPerSec: number;
  chunksPerSec: number;
  chunksPerFrame: number;
}

async function latency(model: StampModel, url: string, store: string, where: 'in-process' | 'cross-process', tasks: number): Promise<StreamLatency> {
  const s = await setUp(url, where);
  const all: number[] = [];
  try {
    await streamOne(s, model, 'stamp:20:5:100'); // warm-up
    // 200 chunks 5 ms apart, after 300 ms: the client's stream is open before the first one.
    for (let i = 0; i < tasks; i++) all.push(...(await streamOne(s, model, 'stamp:200:5:300')).latencies);
  } finally {
    await s.close();
  }
  return { store, worker: where, samples: all.length, p50Ms: median(all), p99Ms: percentile(all, 99) };
}

async function throughput(model: StampModel, url: string, store: string): Promise<StreamThroughput> {
  const s = await setUp(url, 'in-process');
  try {
    await streamOne(s, model, 'stamp:200:0:100'); // warm-up
    const r = await streamOne(s, model, 'stamp:5000:0:300');
    if (r.chunks !== 5000) throw new Error(`bench (t): the client saw ${r.chunks} of 5,000 chunks`);
    const secs = (r.lastAt - r.firstAt) / 1000;
    return { store, framesPerSec: r.frames / secs, chunksPerSec: r.chunks / secs, chunksPerFrame: r.chunks / r.frames };
  } finally {
    await s.close();
  }
}

/** A server process's heap and RSS after a full GC, its open connections and unfinished responses. */
interface Mem {
  heapMb: number;
  rssMb: number;
  connections: number;
  streams: number;
}

export interface StreamMemory {
  store: string;
  clients: number;
  idle: Mem;
  streaming: Mem;
  after: Mem;
}

async function memory(model: StampModel, url: string, store: string, clients: number): Promise<StreamMemory> {
  const child = fork(join(root, 'bench/stream-server.ts'), [url, TOKEN], { execArgv: ['--expose-gc', '--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const next = <T>(): Promise<T> => new Promise((resolve) => child.once('message', (m) => resolve(m as T)));
  const mem = async (): Promise<Mem> => {
    const answer = next<{ heapUsed: number; rss: number; connections: number; streams: number }>();
    child.send('mem');
    const m = await answer;
    return { heapMb: m.heapUsed / 2 ** 20, rssMb: m.rss / 2 ** 20, connections: m.connections, streams: m.streams };
  };
  const { url: base } = await next<{ url: string }>();
  const engine = new Engine({ store: url });
  try {
    // A long answer: a chunk every 20 ms for as long as the measure takes (the task is cancelled after).
    const { id } = await engine.start('bench-stream', { baseURL: model.baseURL, model: 'stamp:100000:20:0' });
    await readStream(`${base}/api/tasks/${id}/stream`, AbortSignal.timeout(1000)); // running, and streaming
    const idle = await mem();
    const abort = new AbortController();
    let receiving = 0;
    const seen = new Set<number>();
    const everyone = new Promise<void>((resolve) => {
      for (let i = 0; i < clients; i++) {
        void readStream(`${base}/api/tasks/${id}/stream`, abort.signal, () => {
          if (seen.has(i)) return;
          seen.add(i);
          if (++receiving === clients) resolve();
        });
      }
    });
    await everyone;
    await new Promise((r) => setTimeout(r, 2000)); // all 500 receiving for a while
    const streaming = await mem();
    abort.abort();
    // Once the server has seen every client go, streams and sockets (kept alive by the clients'
    // pool for a few seconds): each measure collects garbage first.
    let after = await mem();
    for (let tries = 0; after.streams + after.connections > 0 && tries < 100; tries++) {
      await new Promise((r) => setTimeout(r, 200));
      after = await mem();
    }
    await engine.cancel(id, { reason: 'bench done' });
    return { store, clients, idle, streaming, after };
  } finally {
    child.send('stop');
    await new Promise((r) => child.once('exit', r));
    await engine.close();
  }
}

export async function report(ctx: SectionCtx): Promise<void> {
  const tasks = ctx.quick ? 3 : 10;
  const model = await startStampModel();
  ctx.line(`\n(t) Token streams over HTTP: GET /api/tasks/:id/stream read with fetch over real HTTP. Latency from the`);
  ctx.line(`    model writing a chunk to the client parsing its SSE message (${tasks} tasks × 200 chunks 5 ms apart, live frames only);`);
  ctx.line(`    throughput of one task whose model writes 5,000 chunks at once; a server process's memory with 500 clients.`);
  try {
    const lat: StreamLatency[] = [await latency(model, `sqlite:${join(tempDir(), 'streams.db')}`, 'SQLite', 'in-process', tasks)];
    if (ctx.pgUp) {
      lat.push(await latency(model, postgres.freshPgUrl('streamlat'), 'PostgreSQL', 'in-process', tasks));
      lat.push(await latency(model, postgres.freshPgUrl('streamlatx'), 'PostgreSQL', 'cross-process', tasks));
    }
    for (const l of lat) ctx.line(`    latency    ${l.store.padEnd(10)} worker ${l.worker.padEnd(13)} p50 ${fmt(l.p50Ms, 1)} ms   p99 ${fmt(l.p99Ms, 1)} ms   (${l.samples} chunks)`);
    const thr: StreamThroughput[] = [await throughput(model, `sqlite:${join(tempDir(), 'streams-thr.db')}`, 'SQLite')];
    if (ctx.pgUp) thr.push(await throughput(model, postgres.freshPgUrl('streamthr'), 'PostgreSQL'));
    for (const t of thr) ctx.line(`    throughput ${t.store.padEnd(10)} ${fmt(t.framesPerSec, 0)} frames/s, ${fmt(t.chunksPerSec, 0)} chunks/s (${fmt(t.chunksPerFrame, 1)} chunks a frame)`);
    const memUrl = ctx.pgUp ? postgres.freshPgUrl('streammem') : `sqlite:${join(tempDir(), 'streams-mem.db')}`;
    const m = await memory(model, memUrl, ctx.pgUp ? 'PostgreSQL' : 'SQLite', 500);
    ctx.line(
      `    memory     ${m.store}: heap ${fmt(m.idle.heapMb, 1)} MB with no client → ${fmt(m.streaming.heapMb, 1)} MB with ${m.clients} receiving (${m.streaming.streams} open streams) → ${fmt(m.after.heapMb, 1)} MB once they left (${m.after.streams} open streams, ${m.after.connections} connections); RSS ${fmt(m.idle.rssMb, 0)} → ${fmt(m.streaming.rssMb, 0)} → ${fmt(m.after.rssMb, 0)} MB`,
    );
    ctx.results.streams = { latency: lat, throughput: thr, memory: m };
  } finally {
    await model.close();
  }
}
