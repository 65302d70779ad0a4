// `npm run bench`, (k) flow control: the cost of a claim under a limit per key. 10,000 due tasks
// over 1,000 keys with `concurrency: { key, limit: 1 }`, against the same 10,000 tasks without a
// key, in two layouts: keys mixed (task i has key i mod 1,000) and in runs (ten consecutive tasks
// per key, so once a key's first task is taken its nine others sit at the front of the queue,
// blocked, and every later claim passes over them). Timed: 100 claims of 10 straight on the store
// (1,000 tasks taken, one per key under the limit), on one connection; shown as keyed / unkeyed.
import { join } from 'node:path';
import pg from 'pg';
import { Engine, openStore, workflow } from '../dist/index.js';
import { fmt, tempDir, type SectionCtx } from './lib.ts';
import * as postgres from './postgres.ts';

export interface ClaimCost {
  store: string;
  layout: Layout;
  tasks: number;
  keys: number;
  claims: number;
  unkeyedMs: number;
  keyedMs: number;
  ratio: number;
}

const TASKS = 10_000;
const KEYS = 1_000;
const CLAIMS = 100;
const BATCH = 10;

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

/** Fills a fresh store with the tasks, then times the claims; ms. */
async function claimTime(url: string, wf: typeof plain | typeof keyed, layout: Layout): Promise<number> {
  const engine = new Engine({ store: url, workflows: [wf] });
  try {
    await engine.ready();
    for (let at = 0; at < TASKS; at += 1000) {
      await engine.startMany(Array.from({ length: 1000 }, (_, i) => ({ workflow: wf, input: { k: layout === 'mixed' ? (at + i) % KEYS : Math.floor((at + i) / (TASKS / KEYS)) } })));
    }
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
    const t0 = performance.now();
    let taken = 1;
    for (let i = 0; i < CLAIMS; i++) taken += (await store.claim(request(Date.now() + 1000))).length;
    const ms = performance.now() - t0;
    if (taken < Math.min(CLAIMS * BATCH, KEYS)) throw new Error(`bench flow-control: ${wf.name} took only ${taken} tasks`);
    return ms;
  } finally {
    await store.close();
  }
}

/** `mixed`: task i has key i mod 1,000; `runs`: ten consecutive tasks per key (a full key's backlog sits at the front). */
type Layout = 'mixed' | 'runs';

async function measure(store: string, layout: Layout, url: (label: string) => string): Promise<ClaimCost> {
  const unkeyedMs = await claimTime(url('plain'), plain, layout);
  const keyedMs = await claimTime(url('keyed'), keyed, layout);
  return { store, layout, tasks: TASKS, keys: KEYS, claims: CLAIMS, unkeyedMs, keyedMs, ratio: keyedMs / unkeyedMs };
}

export async function report(c: SectionCtx): Promise<void> {
  c.line(`\n(k) Flow control: ${CLAIMS} claims of ${BATCH} from ${TASKS} due tasks over ${KEYS} keys, limit 1 per key vs no key;`);
  c.line('    mixed: task i has key i mod 1,000; runs: ten consecutive tasks per key (each claim skips the backlog of the keys it filled).');
  const figures: ClaimCost[] = [];
  for (const layout of ['mixed', 'runs'] as const) {
    figures.push(await measure('sqlite', layout, (label) => `sqlite:${join(tempDir(), `${label}.db`)}`));
    if (c.pgUp) figures.push(await measure('postgres', layout, (label) => postgres.freshPgUrl(`flow_${label}`)));
  }
  for (const f of figures) {
    c.line(`    ${f.store.padEnd(9)} ${f.layout.padEnd(6)} no key ${fmt(f.unkeyedMs, 0).padStart(5)} ms | limit per key ${fmt(f.keyedMs, 0).padStart(5)} ms | ratio ${fmt(f.ratio, 2)}×`);
  }
  c.results.flowControl = figures;
}
