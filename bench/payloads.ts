// `npm run bench`, (p) the payload store. A chat loop that checkpoints its whole transcript every
// turn (two ~1 KB messages a turn, bench/peers/chat-messages.mjs), run to 100, 200 and 300 turns on
// a fresh store each time:
// - bytes stored, Stepwise with the payload store (the default) and without it (`payloads: false`),
//   on SQLite (the bytes of every column of every table, and the file's size) and PostgreSQL (the
//   tables' size on disk, indexes and TOAST included), beside LangGraph.js with its SQLite
//   checkpointer doing the same loop (bench/peers/langgraph.mjs, the same two measures);
// - per-step cost of small values (below the threshold): a 1,000-step no-op task, start to
//   result, payload store on and off alternately, median of 3;
// - resuming at turn 290 of 300: a fresh engine's worker replays the 290 recorded turns and runs
//   the last 10; from the signal that wakes it to its result, and the most heap the process used
//   above what it used before (after a full GC), sampled every 2 ms; in a second run, the most heap
//   still live, a GC before each sample (every 10 ms: what the process holds, not its garbage).
import Database from 'better-sqlite3';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import pg from 'pg';
import { Engine, workflow } from '../dist/index.js';
import { fmt, median, root, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';
import { manySteps } from './workflows.ts';
// @ts-expect-error: a plain JavaScript module shared with the peers' scripts
import { turnMessages } from './peers/chat-messages.mjs';

type Message = { role: string; content: string };
const messagesOf = turnMessages as (t: number) => Message[];

const chat = workflow('bench-chat', async (ctx, input: { turns: number; parkAt?: number }) => {
  let transcript: Message[] = [];
  for (let t = 0; t < input.turns; t++) {
    if (t === input.parkAt) await ctx.waitForEvent('go');
    transcript = await ctx.step('turn', () => [...transcript, ...messagesOf(t)]);
  }
  return transcript.length;
});

interface Bytes {
  rows: number;
  disk: number;
}

async function sqliteBytes(path: string): Promise<Bytes> {
  const db = new Database(path);
  try {
    db.pragma('wal_checkpoint(TRUNCATE)');
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as Array<{ name: string }>).map((r) => r.name);
    let rows = 0;
    for (const t of tables) {
      const cols = (db.prepare(`PRAGMA table_info("${t}")`).all() as Array<{ name: string }>).map((c) => `coalesce(length("${c.name}"), 0)`);
      rows += Number((db.prepare(`SELECT coalesce(sum(${cols.join(' + ')}), 0) AS n FROM "${t}"`).get() as { n: number }).n);
    }
    const disk = (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
    return { rows, disk };
  } finally {
    db.close();
  }
}

async function pgBytes(url: string): Promise<Bytes> {
  const schema = new URL(url).searchParams.get('schema') as string;
  const client = new pg.Client({ connectionString: postgres.PG_URL });
  await client.connect();
  try {
    const tables = (await client.query<{ t: string }>('SELECT table_name AS t FROM information_schema.tables WHERE table_schema = $1', [schema])).rows.map((r) => r.t);
    let rows = 0;
    let disk = 0;
    for (const t of tables) {
      const r = (await client.query(`SELECT coalesce(sum(pg_column_size(x.*)), 0)::bigint AS rows, pg_total_relation_size('"${schema}"."${t}"')::bigint AS disk FROM "${schema}"."${t}" x`))
        .rows[0];
      rows += Number(r.rows);
      disk += Number(r.disk);
    }
    return { rows, disk };
  } finally {
    await client.end();
  }
}

async function runChat(url: string, turns: number, payloads: boolean): Promise<void> {
  const engine = new Engine({ store: url, workflows: [chat], ...(payloads ? {} : { payloads: false as const }) });
  const worker = engine.worker({ concurrency: 1 });
  await worker.start();
  try {
    const { id } = await engine.start(chat, { turns });
    await engine.result(id, { timeout: '600s' });
  } finally {
    await engine.close();
  }
}

function langGraph(turns: number): Bytes | { error: string } {
  const dir = join(root, 'bench/peers');
  if (!existsSync(join(dir, 'node_modules/@langchain/langgraph-checkpoint-sqlite'))) {
    const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
    if (r.status !== 0) return { error: 'npm ci in bench/peers failed (LangGraph.js not installed)' };
  }
  try {
    const out = execFileSync(process.execPath, [join(dir, 'langgraph.mjs'), join(tempDir(), 'langgraph.db'), String(turns)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const r = JSON.parse(out.trim().split('\n').at(-1) as string) as { bytes: number; fileBytes: number };
    return { rows: r.bytes, disk: r.fileBytes };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

const kb = (n: number): string => `${fmt(n / 1024, 0)} KB`;

async function bytesSection(ctx: SectionCtx, turnsList: number[]): Promise<void> {
  const distinct = (turns: number): number => Array.from({ length: turns }, (_, t) => messagesOf(t).reduce((a, m) => a + JSON.stringify(m).length, 0)).reduce((a, b) => a + b, 0);
  const figures: Array<Record<string, unknown>> = [];
  for (const turns of turnsList) {
    const row: Record<string, unknown> = { turns, distinct: distinct(turns) };
    for (const payloads of [true, false]) {
      const path = join(tempDir(), 'chat.db');
      await runChat(`sqlite:${path}`, turns, payloads);
      row[`sqlite${payloads ? '' : 'Off'}`] = await sqliteBytes(path);
      if (ctx.pgUp) {
        const url = postgres.freshPgUrl(`chat${turns}${payloads ? 'on' : 'off'}`);
        await runChat(url, turns, payloads);
        row[`postgres${payloads ? '' : 'Off'}`] = await pgBytes(url);
      }
    }
    row.langgraph = langGraph(turns);
    figures.push(row);
  }
  ctx.line('    turns | distinct content | Stepwise SQLite: rows / file | off: rows / file | LangGraph.js SQLite: rows / file | Stepwise PostgreSQL on disk: on / off');
  for (const r of figures) {
    const b = (k: string): string => {
      const v = r[k] as Bytes | { error: string } | undefined;
      if (!v) return '–';
      return 'error' in v ? `(${v.error.slice(0, 60)})` : `${kb(v.rows)} / ${kb(v.disk)}`;
    };
    const disk = (k: string): string => (r[k] ? kb((r[k] as Bytes).disk) : '–');
    ctx.line(
      `    ${String(r.turns).padStart(5)} | ${kb(r.distinct as number).padStart(16)} | ${b('sqlite').padEnd(27)} | ${b('sqliteOff').padEnd(16)} | ${b('langgraph').padEnd(32)} | ${disk('postgres')} / ${disk('postgresOff')}`,
    );
  }
  const first = figures[0] as Record<string, Bytes>;
  const last = figures.at(-1) as Record<string, Bytes>;
  const growth = (k: string): string => (last[k] && first[k] && !('error' in last[k]) ? fmt(last[k].rows / first[k].rows, 1) : '–');
  ctx.line(
    `    from ${first.turns} to ${last.turns} turns (×${fmt(Number(last.turns) / Number(first.turns), 0)}), rows grow ×${growth('sqlite')} with the payload store, ×${growth('sqliteOff')} without, ×${growth('langgraph')} for LangGraph.js`,
  );
  ctx.results.payloadBytes = figures;
}

async function smallValues(ctx: SectionCtx, steps: number, rounds: number): Promise<void> {
  const stores: Array<{ label: string; url: () => string }> = [{ label: 'SQLite', url: () => `sqlite:${join(tempDir(), 'small.db')}` }];
  if (ctx.pgUp) stores.push({ label: 'PostgreSQL', url: () => postgres.freshPgUrl('small') });
  const out: Array<Record<string, unknown>> = [];
  for (const s of stores) {
    const times: Record<'on' | 'off', number[]> = { on: [], off: [] };
    for (let round = 0; round < rounds; round++) {
      for (const mode of round % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const engine = new Engine({ store: s.url(), workflows: [manySteps], ...(mode === 'off' ? { payloads: false as const } : {}) });
        const worker = engine.worker({ concurrency: 1 });
        await worker.start();
        const warm = await engine.start(manySteps, { n: 50 });
        await engine.result(warm.id, { timeout: '120s' });
        const t0 = performance.now();
        const { id } = await engine.start(manySteps, { n: steps });
        await engine.result(id, { timeout: '300s' });
        times[mode].push(((performance.now() - t0) * 1000) / steps);
        await engine.close();
      }
    }
    const on = median(times.on);
    const off = median(times.off);
    out.push({ store: s.label, onUs: on, offUs: off, rounds: times });
    const range = (xs: number[]): string => `${fmt(Math.min(...xs), 0)}–${fmt(Math.max(...xs), 0)}`;
    ctx.line(
      `    ${s.label.padEnd(10)} ${fmt(on, 0)} µs a step with the payload store, ${fmt(off, 0)} µs without: ×${fmt(on / off, 2)} (rounds: ${range(times.on)} and ${range(times.off)} µs)`,
    );
  }
  ctx.results.payloadSmallValues = out;
}

function gcFunction(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** One resume of a task parked at `parkAt`: signal to result, and the heap above the start (with `live`, after a GC each sample). */
async function resumeOnce(url: string, payloads: boolean, turns: number, parkAt: number, live: boolean, gc: () => void): Promise<{ ms: number; heapMb: number }> {
  const options = { store: url, workflows: [chat], ...(payloads ? {} : { payloads: false as const }) };
  const first = new Engine(options);
  await first.worker({ concurrency: 1 }).start();
  const { id } = await first.start(chat, { turns, parkAt });
  while ((await first.get(id, { steps: false, history: false })).status !== 'waiting') await new Promise((r) => setTimeout(r, 20));
  await first.close();
  const second = new Engine(options);
  await second.worker({ concurrency: 1 }).start();
  gc();
  const base = process.memoryUsage().heapUsed;
  let peak = base;
  const sampler = setInterval(
    () => {
      if (live) gc();
      peak = Math.max(peak, process.memoryUsage().heapUsed);
    },
    live ? 10 : 2,
  );
  const t0 = performance.now();
  await second.signal(id, 'go', null);
  await second.result(id, { timeout: '600s' });
  const ms = performance.now() - t0;
  clearInterval(sampler);
  await second.close();
  return { ms, heapMb: (peak - base) / 1024 / 1024 };
}

async function resumeSection(ctx: SectionCtx, turns: number, parkAt: number): Promise<void> {
  const gc = gcFunction();
  const out: Array<Record<string, unknown>> = [];
  const stores: Array<{ label: string; url: () => string }> = [{ label: 'SQLite', url: () => `sqlite:${join(tempDir(), 'resume.db')}` }];
  if (ctx.pgUp) stores.push({ label: 'PostgreSQL', url: () => postgres.freshPgUrl('resume') });
  for (const s of stores) {
    for (const payloads of [true, false]) {
      const timed = await resumeOnce(s.url(), payloads, turns, parkAt, false, gc);
      const held = await resumeOnce(s.url(), payloads, turns, parkAt, true, gc);
      out.push({ store: s.label, payloads, ms: timed.ms, heapMb: timed.heapMb, liveMb: held.heapMb });
      ctx.line(
        `    ${s.label.padEnd(10)} ${payloads ? 'payload store' : 'off          '}  ${fmt(timed.ms, 0)} ms to the result; heap +${fmt(timed.heapMb, 1)} MB at most, +${fmt(held.heapMb, 1)} MB live (after a GC)`,
      );
    }
  }
  ctx.results.payloadResume = out;
}

export async function report(ctx: SectionCtx): Promise<void> {
  const turnsList = ctx.quick ? [50, 100] : [100, 200, 300];
  ctx.line(`\n(p) Payload store: a chat loop checkpointing its whole transcript every turn (two ~1 KB messages a turn), ${turnsList.join(' / ')} turns, bytes stored:`);
  await bytesSection(ctx, turnsList);
  const steps = ctx.quick ? 200 : 1000;
  const rounds = ctx.quick ? 3 : 7;
  ctx.line(`    Small values (below the threshold): a ${steps}-step no-op task, start to result, median of ${rounds}, on and off alternately:`);
  await smallValues(ctx, steps, rounds);
  const turns = ctx.quick ? 100 : 300;
  const parkAt = turns - 10;
  ctx.line(
    `    Resuming at turn ${parkAt} of ${turns} (a fresh engine replays ${parkAt} turns, runs 10): signal to result; the most heap used above the start, and the most still live after a GC (sampled every 10 ms in a second run):`,
  );
  await resumeSection(ctx, turns, parkAt);
}
