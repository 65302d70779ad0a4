/**
 * `npm start`: the research-brief agent survives a killed worker.
 *
 * 1. Starts a task on the embedded SQLite store (./.stepwise/stepwise.db).
 * 2. Starts a worker process (`stepwise worker examples/research-brief/workflow.ts`).
 * 3. In the middle of the third model call, kills that worker with SIGKILL, on purpose.
 * 4. Starts a second worker, which reclaims the task when the first one's lease expires and
 *    finishes it without re-running the steps that had completed.
 * 5. The brief parks for an editor's review: prints the exact command a reviewer would run; a
 *    scripted reviewer approves it through the public API (`engine.decide`), with an edit.
 * 6. Prints what happened step by step, which model calls ran twice, and where the brief is.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Engine, formatMs, type ApprovalDecision, type StepInfo, type TaskInfo } from '../../src/index.ts';
import { researchBrief, type Summary } from './workflow.ts';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const db = 'sqlite:./.stepwise/stepwise.db';
const outDir = resolve('.stepwise/briefs');
const callLog = resolve('.stepwise/research-brief/llm-calls.log');
const LEASE_MS = 3000;
/** The TypeScript loader, by absolute path so that the worker starts from any working directory. */
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

const tty = process.stdout.isTTY && !process.env.NO_COLOR;
const c =
  (code: number) =>
  (s: string): string =>
    tty ? `\x1b[${code}m${s}\x1b[0m` : s;
const bold = c(1);
const dim = c(2);
const red = c(31);
const green = c(32);
const cyan = c(36);
const t0 = Date.now();
const say = (msg: string): void => console.log(`${dim(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s]`)} ${msg}`);

function startWorker(n: number): { child: ChildProcess; lines: string[] } {
  const child = spawn(
    process.execPath,
    [
      '--import',
      tsx,
      join(root, 'src/cli/main.ts'),
      'worker',
      join(here, 'workflow.ts'),
      '--db',
      db,
      '--lease-ms',
      String(LEASE_MS),
      '--heartbeat-ms',
      '500',
      '--poll-ms',
      '200',
      '--worker-id',
      `worker-${n}`,
      '--log',
      'none',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } },
  );
  const lines: string[] = [];
  const onData = (d: Buffer): void => {
    for (const line of d.toString().split('\n').filter(Boolean)) {
      lines.push(line);
      if (/step .* (started|completed)|claimed|reclaimed|→|lease/.test(line)) console.log(dim(`          worker-${n} | ${line.replace(/^\S+ /, '')}`));
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  return { child, lines };
}

const stepLabel = (s: StepInfo): string => (s.name.startsWith('summarise') ? `${s.name} (${(s.output as Summary | undefined)?.doc ?? '…'})` : s.name);

async function main(): Promise<void> {
  rmSync(callLog, { force: true });
  console.log(bold('\nStepwise — research-brief agent, with a worker crash on purpose\n'));
  const engine = new Engine({ store: db, workflows: [researchBrief] });
  const { id } = await engine.start('research-brief', {
    topic: 'making long-running AI agents reliable',
    docsDir: join(here, 'docs'),
    outDir,
    callLog,
  });
  say(`Started task ${bold(id)} (workflow research-brief: gather → summarise ×5 → merge → write) in ${db}`);

  const w1 = startWorker(1);
  say(`Started worker-1 (pid ${w1.child.pid}), lease ${LEASE_MS / 1000}s, heartbeat 0.5s`);

  const seen = new Set<string>();
  const report = (task: TaskInfo): void => {
    for (const s of task.steps) {
      if (s.status !== 'completed' || seen.has(s.name)) continue;
      seen.add(s.name);
      const usage = (s.output as Summary | undefined)?.usage;
      say(
        `${green('✓')} ${stepLabel(s)} checkpointed in ${formatMs(s.durationMs ?? 0)}${usage ? dim(` — ${usage.inputTokens} in / ${usage.outputTokens} out tokens`) : ''} ${dim(`(run epoch ${s.epoch})`)}`,
      );
    }
  };

  // Watch until the third summary is being generated, then pull the plug.
  for (;;) {
    report(await engine.get(id));
    if (w1.lines.some((l) => l.includes('step summarise#3 started'))) break;
    if (w1.child.exitCode !== null) throw new Error(`worker-1 exited early:\n${w1.lines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  await new Promise((r) => setTimeout(r, 400)); // let it stream a few tokens
  say(red(bold(`✗ Killing worker-1 (pid ${w1.child.pid}) with SIGKILL in the middle of step summarise#3 — on purpose.`)));
  w1.child.kill('SIGKILL');
  await new Promise((r) => w1.child.once('exit', r));
  const afterKill = await engine.get(id);
  say(`Task is still ${cyan(afterKill.status)} with worker-1's lease; it expires ${formatMs(Math.max(0, (afterKill.lease?.expiresAt ?? Date.now()) - Date.now()))} from now.`);

  const w2 = startWorker(2);
  say(`Started worker-2 (pid ${w2.child.pid}). It will reclaim the task when worker-1's lease expires and resume after the last checkpoint.`);

  let reviewed = false;
  while (!['succeeded', 'failed', 'cancelled'].includes((await engine.get(id)).status)) {
    const current = await engine.get(id);
    report(current);
    const pending = current.approvals.find((a) => a.status === 'pending');
    if (pending && !reviewed && current.status === 'waiting') {
      reviewed = true;
      say(`${cyan('⏸')} The brief is parked for review (task ${cyan(current.status)}, no worker slot held). Approval ${bold(pending.id)} asks ${pending.approvers.join(', ')}.`);
      say(`  A reviewer would run:  ${bold(`npx stepwise approve ${pending.id} --as ${pending.approvers[0] ?? 'editor'} --db ${db}`)}`);
      say('  (or list the queue: npx stepwise approvals --pending --approver editor)');
      const preview = pending.payload as { words: number };
      // The scripted reviewer: reads the brief from the payload and approves it with an edit.
      const merged = current.steps.find((s) => s.name === 'merge')?.output as { markdown: string } | undefined;
      const edited = `> Reviewed by the editor: ${preview.words} words, approved for publication.\n\n${merged?.markdown ?? ''}`;
      const decided = await engine.decide(pending.id, {
        approve: true,
        by: 'editor',
        comment: 'Good to go; added a review note.',
        data: { markdown: edited },
        idempotencyKey: `review-${id}`,
      });
      say(`${green('✓')} editor approved it through engine.decide (${decided.status}); the task is runnable again.`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const task = await engine.get(id);
  report(task);
  w2.child.kill('SIGTERM');
  await new Promise((r) => w2.child.once('exit', r));
  if (task.status !== 'succeeded') throw new Error(`task ended ${task.status}: ${JSON.stringify(task)}`);

  // Which model calls ran, and how often (from the simulated model's own call log).
  const calls = existsSync(callLog)
    ? readFileSync(callLog, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { idempotencyKey: string; pid: number })
    : [];
  const byKey = new Map<string, number[]>();
  for (const call of calls) byKey.set(call.idempotencyKey, [...(byKey.get(call.idempotencyKey) ?? []), call.pid]);

  console.log(bold('\nWhat happened, step by step'));
  for (const s of task.steps) {
    const pids = s.idempotencyKey ? byKey.get(s.idempotencyKey) : undefined;
    const runBy = s.epoch === 1 ? 'worker-1' : 'worker-2';
    const note = pids && pids.length > 1 ? red(`model called ${pids.length}× with the same idempotency key (interrupted by the kill, then resumed)`) : pids ? `model called once` : '';
    console.log(`  ${String(s.seq).padStart(2)}  ${stepLabel(s).padEnd(40)} ${green(s.status)} by ${runBy}, ${formatMs(s.durationMs ?? 0).padStart(6)}  ${note}`);
  }
  console.log(bold('\nTimeline'));
  for (const h of task.history) {
    if (h.type !== 'transition') continue; // the log also holds each step's checkpoint (listed above)
    const detail = h.event === 'reclaim' ? dim(` (previous owner ${String(h.detail?.previousOwner)} was dead)`) : '';
    console.log(`  +${formatMs(h.at - task.createdAt).padEnd(7)} ${h.event.padEnd(8)} ${h.from ?? '∅'} → ${h.to}${h.actor.kind === 'worker' ? dim(` by ${h.actor.id}`) : ''}${detail}`);
  }
  const out = task.output as { path: string; documents: number; tokens: { input: number; output: number }; review: ApprovalDecision };
  // Which model calls ran more than once: only one may, the call the kill interrupted.
  const repeated = task.steps.filter((s) => s.idempotencyKey && (byKey.get(s.idempotencyKey)?.length ?? 0) > 1);
  const interrupted = repeated.length === 1 && repeated[0]?.epoch === 2;
  console.log(bold('\nResult'));
  console.log(
    interrupted || !repeated.length
      ? `  ${green('succeeded')} after ${task.runs} runs; ${repeated.length} model call repeated (the interrupted one), every completed step ran exactly once.`
      : red(`  succeeded after ${task.runs} runs, but these model calls ran more than once: ${repeated.map((s) => s.name).join(', ')}`),
  );
  console.log(`  ${out.documents} documents, ${out.tokens.input} input + ${out.tokens.output} output tokens.`);
  console.log(`  Reviewed: ${out.review.approved ? 'approved' : 'rejected'} by ${out.review.by ?? 'its timeout policy'} ("${out.review.comment ?? ''}").`);
  console.log(`  Brief written to ${bold(relative(process.cwd(), out.path))}`);
  console.log(dim(`  Inspect it: npx stepwise show ${id}    (or: npx stepwise ls)\n`));
  await engine.close();
}

main().catch((e: unknown) => {
  console.error(red(`npm start failed: ${e instanceof Error ? e.stack : String(e)}`));
  process.exit(1);
});
