// `npm run bench`, (s) chat turns (issue 32): a chat session of 300 turns, one task, parked between
// messages. A turn is timed from the client's `engine.signal(id, 'chat:message', …)` to the client
// seeing the reply step's `step:completed` entry through `engine.events({ taskId, follow: true })`:
// the user's message reaching the worker, the worker taking the task up, the reply step, and the
// news reaching the client. The client waits 40 ms between turns (a person types slower), so the
// run parks every turn. Each figure is the median of 20 turns: turns 1–20 ("turn 10") and
// 281–300 ("turn 300"). Side by side in one run: the worker in the client's process and in a
// process of its own (`stepwise worker`), with parked runs kept in memory (the default) and
// without (`keepParked: 0`: every turn replays the session's journal, as before).
import { Engine } from '../dist/index.js';
import { join } from 'node:path';
import { chatTurns } from './workflows.ts';
import { fmt, median, percentile, spawnWorker, stopWorkers, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

export interface ChatTurns {
  store: string;
  worker: 'in-process' | 'cross-process';
  kept: boolean;
  turns: number;
  turn10Ms: number;
  turn300Ms: number;
  /** Over every turn of the session. */
  p50Ms: number;
  p99Ms: number;
}

const THINK_MS = 40;

async function measure(url: string, store: string, where: ChatTurns['worker'], kept: boolean, turns: number): Promise<ChatTurns> {
  const engine = new Engine({ store: url, workflows: [chatTurns] });
  const keepParked = kept ? 256 : 0;
  const worker = where === 'in-process' ? engine.worker({ concurrency: 8, keepParked }) : null;
  await worker?.start();
  const child = where === 'cross-process' ? spawnWorker(url, ['--keep-parked', String(keepParked)]) : null;
  const times: number[] = [];
  try {
    const { id } = await engine.start(chatTurns);
    const log = engine.events({ taskId: id, follow: true })[Symbol.asyncIterator]();
    for (let n = 1; n <= turns + 1; n++) {
      await new Promise((r) => setTimeout(r, THINK_MS));
      const t0 = performance.now();
      await engine.signal(id, 'chat:message', { id: `m${n}`, text: n > turns ? 'bye' : `message ${n}` });
      for (;;) {
        const { value, done } = await log.next();
        if (done) throw new Error(`bench (s): the log of ${id} ended before the reply to message ${n}`);
        if (value.type === 'step:completed' && value.step.name === `reply:m${n}`) break;
      }
      if (n <= turns) times.push(performance.now() - t0);
    }
    await engine.result(id, { timeout: '60s' });
    await log.return?.();
  } finally {
    if (child) await stopWorkers([child]);
    await worker?.stop();
    await engine.close();
  }
  const at = (from: number): number => median(times.slice(from, from + 20));
  return { store, worker: where, kept, turns, turn10Ms: at(0), turn300Ms: at(turns - 20), p50Ms: median(times), p99Ms: percentile(times, 99) };
}

export async function report(ctx: SectionCtx): Promise<void> {
  const turns = ctx.quick ? 100 : 300;
  const rows: ChatTurns[] = [];
  ctx.line('');
  ctx.line(`(s) chat turns: signal → reply seen by the client, median of 20 turns, ${turns} turns in one session`);
  const stores: Array<[string, () => Promise<string>]> = [['sqlite', async () => `sqlite:${join(tempDir(), 'chat.db')}`]];
  if (ctx.pgUp) stores.push(['postgres', async () => postgres.freshPgUrl('chat')]);
  for (const [store, url] of stores) {
    for (const where of ['in-process', 'cross-process'] as const) {
      for (const kept of [true, false]) {
        const r = await measure(await url(), store, where, kept, turns);
        rows.push(r);
        const last = `turn ${turns}`;
        ctx.line(
          `  ${store.padEnd(8)} ${where.padEnd(13)} ${kept ? 'kept in memory' : 'replayed      '}  turn 10 ${fmt(r.turn10Ms)} ms   ${last} ${fmt(r.turn300Ms)} ms   (${fmt(r.turn300Ms / r.turn10Ms, 2)}×)   all turns p50 ${fmt(r.p50Ms)} / p99 ${fmt(r.p99Ms)} ms`,
        );
      }
    }
  }
  ctx.results.chatTurns = rows;
}
