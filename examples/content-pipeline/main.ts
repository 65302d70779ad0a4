/**
 * The content pipeline, end to end: `node --import tsx examples/content-pipeline/main.ts`.
 *
 * Three changes go through generate → review → publish → notify, on an embedded SQLite store
 * (./.stepwise/content-pipeline.db) with one worker in this process and a CMS on localhost:
 * 1. a low-impact typo fix: published at once (the risk rule skips the review);
 * 2. a high-impact price change: parks for an editor; the notifier prints the "e-mail" with the
 *    command to decide; a scripted editor approves it with an edit; the first publish call times
 *    out after the CMS stored the article, and the retry, carrying the same idempotency key, gets
 *    the same article back instead of publishing twice;
 * 3. a high-impact legal change: the editor rejects it, and its initiator is told why.
 */
import { readFileSync, rmSync, mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { Engine, type ApprovalNotice } from '../../src/index.ts';
import { startCms } from './cms.ts';
import { contentPipeline, type ContentInput, type ContentResult } from './workflow.ts';

const dir = resolve('.stepwise');
const db = `sqlite:${resolve(dir, 'content-pipeline.db')}`;
const outbox = resolve(dir, 'content-pipeline-outbox.jsonl');

/** The notifier: what an e-mail or chat integration would send, printed here. */
const notifier = {
  name: 'mail',
  onApproval(n: ApprovalNotice): void {
    const a = n.approval;
    if (n.kind === 'requested') {
      console.log(`  ✉ to ${a.approvers.join(', ')}: please review "${(a.payload as { title: string }).title}" (task ${a.taskId}, deadline ${a.deadline?.toISOString() ?? 'none'})`);
      console.log(`      approve: ${n.approveCommand.replace('<name>', a.approvers[0] ?? 'editor')}`);
      console.log(`      reject:  ${n.rejectCommand.replace('<name>', a.approvers[0] ?? 'editor')}`);
    } else if (n.kind === 'decided') {
      console.log(
        `  ✉ to ${n.startedBy?.id ?? 'the initiator'}: "${a.name}" was ${a.outcome?.approved ? 'approved' : 'rejected'} by ${a.outcome?.by ?? 'its timeout policy'}${a.outcome?.comment ? ` — "${a.outcome.comment}"` : ''}`,
      );
    } else {
      console.log(`  ✉ ${n.kind}: ${a.name} (${a.id}), approvers now ${a.approvers.join(', ')}`);
    }
  },
};

async function main(): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (const f of ['content-pipeline.db', 'content-pipeline.db-wal', 'content-pipeline.db-shm', 'content-pipeline-outbox.jsonl']) rmSync(resolve(dir, f), { force: true });
  const cms = await startCms();
  const engine = new Engine({ store: db, workflows: [contentPipeline], observers: [notifier] });
  const worker = engine.worker({ concurrency: 4, pollIntervalMs: 100 });
  await worker.start();
  const base = { cmsUrl: cms.url, outbox, editors: ['editor'] };
  const start = (input: Omit<ContentInput, 'cmsUrl' | 'outbox'>, by: string) => engine.start(contentPipeline, { ...base, ...input }, { by });

  console.log('\n1. A low-impact change (a typo fix): no review needed');
  const low = await start({ title: 'Fix typo on the pricing page', brief: 'Fix the spelling of "recieve" on the pricing page.', impact: 'low' }, 'dana');
  const lowResult = await engine.result<ContentResult>(low.id, { timeout: '30s' });
  console.log(`  → published ${lowResult.articleId}: ${lowResult.reason}`);

  console.log('\n2. A high-impact change (new prices): parks for an editor');
  cms.failAfterCommit = 1; // the first publish call stores the article, then times out at the gateway
  const high = await start({ title: 'New prices from March', brief: 'Announce the new Pro plan price of 29 EUR per month from March 1.', impact: 'high' }, 'dana');
  const pending = await waitForApproval(engine, high.id);
  console.log(
    `  task ${high.id} is ${(await engine.get(high.id)).status}; the editor's queue: ${(await engine.approvals({ status: 'pending', approver: 'editor' })).map((a) => a.id).join(', ')}`,
  );
  const edited = `${(pending.payload as { body: string }).body}\n\nPrices include VAT.`;
  await engine.decide(pending.id, { approve: true, by: 'editor', comment: 'Added the VAT note.', data: { body: edited }, idempotencyKey: 'editor-click-1' });
  // A double click of the same button: it counts once.
  await engine.decide(pending.id, { approve: true, by: 'editor', comment: 'Added the VAT note.', data: { body: edited }, idempotencyKey: 'editor-click-1' });
  const highResult = await engine.result<ContentResult>(high.id, { timeout: '30s' });
  const publish = (await engine.get(high.id)).steps.find((s) => s.name === 'publish');
  console.log(
    `  → published ${highResult.articleId}: ${highResult.reason}; the publish step took ${publish?.attempts} attempts, the CMS holds ${cms.articles.filter((a) => a.title === 'New prices from March').length} copy`,
  );

  console.log('\n3. A high-impact change the editor rejects: the initiator is told why');
  const legal = await start({ title: 'Updated terms of service', brief: 'Announce the updated terms of service.', impact: 'high' }, 'sam');
  const legalApproval = await waitForApproval(engine, legal.id);
  await engine.decide(legalApproval.id, { approve: false, by: 'editor', comment: 'Legal has not signed off yet.' });
  const legalResult = await engine.result<ContentResult>(legal.id, { timeout: '30s' });
  console.log(`  → not published: ${legalResult.reason}`);

  console.log('\nOutbox (what the initiators were told):');
  for (const line of readFileSync(outbox, 'utf8').split('\n').filter(Boolean)) console.log(`  ${line}`);
  console.log(`\nThe CMS received ${cms.requests} requests and holds ${cms.articles.length} articles: ${cms.articles.map((a) => `${a.id} "${a.title}"`).join(', ')}.`);
  console.log(`Inspect a task: npx stepwise show ${high.id} --db ${db}\n`);
  await worker.stop();
  await engine.close();
  await cms.close();
}

async function waitForApproval(engine: Engine, taskId: string) {
  for (;;) {
    const t = await engine.get(taskId);
    const open = t.approvals.find((a) => a.status === 'pending');
    if (open && t.status === 'waiting') return open;
    await new Promise((r) => setTimeout(r, 50));
  }
}

main().catch((e: unknown) => {
  console.error(`content-pipeline failed: ${e instanceof Error ? e.stack : String(e)}`);
  process.exit(1);
});
