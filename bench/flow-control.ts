// `npm run bench`, (k) flow control: the cost of a claim under a limit per key. 10,000 due tasks
// over 1,000 keys with `concurrency: { key, limit: 1 }`, against the same 10,000 tasks without a
// key, in two layouts: keys mixed (task i has key i mod 1,000) and in runs (ten consecutive tasks
// per key, so once a key's first task is taken its nine others sit at the front of the queue,
// blocked, and every later claim passes over them). Timed: 100 claims of 10 straight on the store
// (1,000 tasks taken, one per key under the limit), on one connection, each claim on its own; a
// run's figure is the median claim. Three rounds, each a fresh store per case with the keyed and
// unkeyed runs alternating which goes first; shown as keyed / unkeyed (median of the rounds).
// A task behind a full key is held at start (out of the claim's index), so the starts are timed
// too: 10,000 `startMany` in batches of 1,000, keyed / unkeyed.
import { join } from 'node:path';
import pg from 'pg';
import { Engine, openStore, workflow } from '../dist/index.js';
import { fmt, median, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

export interface ClaimCost {
  store: string;
  layout: Layout;
  tasks: number;
  keys: number;
  claims: number;
  /** The median claim of each case (median of the rounds), and keyed / unkeyed per round. */
  unkeyedMs: number;
  keyedMs: number;
  ratio: number;
  ratios: number[];
  /** The 10,000 starts, without and with the key. */
  unkeyedStartMs: number;
  keyedStartMs: number;
  startRatio: number;
}

const TASKS = 10_000;
const KEYS = 1_000;
const CLAIMS = 100;
const BATCH = 10;
const ROUNDS = 3;

const plain = workflow('bench-plain', async () => null);
const keyed = workflow('bench-keyed', async () => null, { concurrency: { key: (input: { k: number }) => `u${input.k}`, limit: 1 } });

/**
 * Table statistics, as autovacuum (PostgreSQL) or `PRAGMA optimize` would have them after a bulk
 * start: without them PostgreSQL guesses the share of due tasks and may sort them all.
 */
async function analyze(url: string): Promise<void> {
  if (!url.startsWith('postgres')) return;
  const schema = new URL(url).searchParams.get('schema') as string;
  const client = new pg.Client({ connectionString: postgres.PG_URL });
  await client.connect();
  try {
    await client.query(`ANALYZE "${schema}".tasks`);
  } finally {
    await client.end();
  }
}

/** Fills a fresh store with the tasks, then times the claims; ms of the starts and of the median claim. */
async function claimTime(url: string, wf: typeof plain | typeof keyed, layout: Layout): Promise<{ startMs: number; claimMs: number }> {
  const engine = new Engine({ store: url, workflows: [wf] });
  let startMs = 0;
  try {
    await engine.ready();
    const s0 = performance.now();
    for (let at = 0; at < TASKS; at += 1000) {
      await engine.startMany(Array.from({ length: 1000 }, (_, i) => ({ workflow: wf, input: { k: layout === 'mixed' ? (at + i) % KEYS : Math.floor((at + i) / (TASKS / KEYS)) } })));
    }
    startMs = performance.now() - s0;
  } finally {
    await engine.close();
  }
  await analyze(url);
  const store = await openStore(url);
  try {
    const request = (now: number) => ({
      workerId: 'bench',
      now,
      leaseMs: 600_000,
      limit: BATCH,
      workflows: [wf.name],
      claim: { from: ['pending', 'waiting'] as const, to: 'running' as const },
      reclaim: { from: [], to: {} },
    });
    await store.claim({ ...request(Date.now()), limit: 1 }); // warm: statements prepared, caches loaded
    const times: number[] = [];
    let taken = 1;
    for (let i = 0; i < CLAIMS; i++) {
      const t0 = performance.now();
      taken += (await store.claim(request(Date.now() + 1000))).length;
      times.push(performance.now() - t0);
    }
    if (taken < Math.min(CLAIMS * BATCH, KEYS)) throw new Error(`bench flow-control: ${wf.name} took only ${taken} tasks`);
    return { startMs, claimMs: median(times) };
  } finally {
    await store.close();
  }
}

/** `mixed`: task i has key i mod 1,000; `runs`: ten consecutive tasks per key (a full key's backlog sits at the front). */
type Layout = 'mixed' | 'runs';

async function measure(store: string, layout: Layout, url: (label: string) => string): Promise<ClaimCost> {
  const rounds: Array<{ unkeyed: { startMs: number; claimMs: number }; withKey: { startMs: number; claimMs: number } }> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const first = round % 2 === 0 ? 'plain' : 'keyed';
    const a = await claimTime(url(first), first === 'plain' ? plain : keyed, layout);
    const b = await claimTime(url(first === 'plain' ? 'keyed' : 'plain'), first === 'plain' ? keyed : plain, layout);
    rounds.push(first === 'plain' ? { unkeyed: a, withKey: b } : { unkeyed: b, withKey: a });
  }
  const ratios = rounds.map((r) => r.withKey.claimMs / r.unkeyed.claimMs);
  const unkeyedStartMs = median(rounds.map((r) => r.unkeyed.startMs));
  const keyedStartMs = median(rounds.map((r) => r.withKey.startMs));
  return {
    store,
    layout,
    tasks: TASKS,
    keys: KEYS,
    claims: CLAIMS,
    unkeyedMs: median(rounds.map((r) => r.unkeyed.claimMs)),
    keyedMs: median(rounds.map((r) => r.withKey.claimMs)),
    ratio: median(ratios),
    ratios,
    unkeyedStartMs,
    keyedStartMs,
    startRatio: keyedStartMs / unkeyedStartMs,
  };
}

export async function report(c: SectionCtx): Promise<void> {
  c.line(`\n(k) Flow control: ${CLAIMS} claims of ${BATCH} from ${TASKS} due tasks over ${KEYS} keys, limit 1 per key vs no key, ${ROUNDS} rounds;`);
  c.line('    mixed: task i has key i mod 1,000; runs: ten consecutive tasks per key (nine of each key start held, behind the first).');
  const figures: ClaimCost[] = [];
  for (const layout of ['mixed', 'runs'] as const) {
    figures.push(await measure('sqlite', layout, (label) => `sqlite:${join(tempDir(), `${label}.db`)}`));
    if (c.pgUp) figures.push(await measure('postgres', layout, (label) => postgres.freshPgUrl(`flow_${label}`)));
  }
  for (const f of figures) {
    c.line(
      `    ${f.store.padEnd(9)} ${f.layout.padEnd(6)} median claim: no key ${fmt(f.unkeyedMs, 2)} ms | limit per key ${fmt(f.keyedMs, 2)} ms | ratio ${fmt(f.ratio, 2)}× (rounds ${f.ratios.map((r) => fmt(r, 2)).join(', ')})` +
        `   starts: ${fmt(f.unkeyedStartMs, 0)} / ${fmt(f.keyedStartMs, 0)} ms, ratio ${fmt(f.startRatio, 2)}×`,
    );
  }
  c.results.flowControl = figures;
}
