// `stepwise start --tag` and `stepwise ls` with search flags, run as real processes against a
// SQLite file: tags, creation time, text, and flags of the wrong shape refused.
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine } from '../src/index.ts';
import { tempDir } from './support/engine.ts';
import { runCli } from './support/processes.ts';
import { triple } from './fixtures/crash-workflows.ts';
import { summary } from './fixtures/drift-workflows.ts';

describe('stepwise fork and retry --from-step', () => {
  it('forks a finished task from a step with another input, and re-runs it from a step', async () => {
    const db = `sqlite:${join(tempDir(), 'fork.db')}`;
    const engine = new Engine({ store: db, workflows: [triple] });
    const worker = engine.worker({ concurrency: 1, pollIntervalMs: 20 });
    await worker.start();
    try {
      const { id } = await engine.start(triple, { n: 2 });
      await engine.result(id, { timeout: '20s' });
      const steps = (await engine.get(id)).steps.map((s) => s.name);
      const from = steps[1] as string;
      const forked = runCli(['fork', id, '--from-step', from, '--input', '{"n":3}', '--tag', 'experiment=cli', '--db', db, '--json']);
      expect(forked.code, forked.err).toBe(0);
      const forkId = (JSON.parse(forked.out) as { id: string }).id;
      await engine.result(forkId, { timeout: '20s' });
      expect(await engine.get(forkId)).toMatchObject({ forkedFrom: id, tags: { experiment: 'cli' }, input: { n: 3 } });
      expect(runCli(['show', forkId, '--db', db]).out).toContain(`forked     from ${id}`);
      const refused = runCli(['retry', id, '--db', db]);
      expect(refused.code).not.toBe(0);
      expect(refused.err).toContain('--from-step');
      const rerun = runCli(['retry', id, '--from-step', from, '--db', db]);
      expect(rerun.code, rerun.err).toBe(0);
      await engine.result(id, { timeout: '20s' });
      expect((await engine.get(id)).retries).toBe(1);
      const badStep = runCli(['fork', id, '--from-step', 'nope', '--db', db]);
      expect(badStep.code).not.toBe(0);
      expect(badStep.err).toContain('no step "nope"');
    } finally {
      await worker.stop();
      await engine.close();
    }
    // Each command-line run is a process of its own (several seconds on a busy machine).
  }, 120_000);
});

describe('stepwise bulk', () => {
  it('only counts without --yes, then acts on the matching tasks as --as', async () => {
    const db = `sqlite:${join(tempDir(), 'bulk.db')}`;
    const engine = new Engine({ store: db, workflows: [triple] });
    const worker = engine.worker({ concurrency: 1 });
    await worker.start();
    await worker.stop();
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await engine.start(triple, { n: i }, { tags: { batch: i < 2 ? 'b1' : 'b2' } })).id);
      const dry = runCli(['bulk', 'cancel', '--tag', 'batch=b1', '--db', db]);
      expect(dry.code, dry.err).toBe(0);
      expect(dry.out).toContain('2 task(s) match; cancel would apply to 2.');
      expect(dry.out).toContain('Run again with --yes');
      expect((await engine.count({ status: 'pending' })).pending).toBe(3);
      const done = runCli(['bulk', 'cancel', '--tag', 'batch=b1', '--reason', 'superseded', '--as', 'ops', '--yes', '--db', db, '--json']);
      expect(done.code, done.err).toBe(0);
      expect(JSON.parse(done.out)).toMatchObject({ action: 'cancel', dryRun: false, acted: 2 });
      expect(await engine.get(ids[0] as string)).toMatchObject({ status: 'cancelled', cancelReason: 'superseded' });
      expect((await engine.get(ids[2] as string)).status).toBe('pending');
      const bad = runCli(['bulk', 'explode', '--db', db]);
      expect(bad.code).not.toBe(0);
      expect(bad.err).toContain('unknown action "explode"');
    } finally {
      await engine.close();
    }
    // Each command-line run is a process of its own (several seconds on a busy machine).
  }, 120_000);
});

describe('stepwise ls: search', () => {
  it('starts tagged tasks and finds them by tag, creation time and text; a bad flag is refused', async () => {
    const db = `sqlite:${join(tempDir(), 'search.db')}`;
    // The worker registers the workflow (a start of an unknown workflow is refused); then it stops.
    const engine = new Engine({ store: db, workflows: [triple] });
    const worker = engine.worker({ concurrency: 1 });
    await worker.start();
    await worker.stop();
    await engine.close();
    const start = (n: number, ...flags: string[]): string => {
      const r = runCli(['start', 'triple', '--input', JSON.stringify({ n }), '--db', db, '--json', ...flags]);
      expect(r.code, r.err).toBe(0);
      return (JSON.parse(r.out) as { id: string }).id;
    };
    const acme = start(1, '--tag', 'tenant=acme', '--tag', 'user=u1');
    const globex = start(2, '--tag', 'tenant=globex');
    const plain = start(3, '--title', 'Nightly digest');

    const ls = (...flags: string[]): string[] => {
      const r = runCli(['ls', '--db', db, '--json', ...flags]);
      expect(r.code, r.err).toBe(0);
      return (JSON.parse(r.out) as { tasks: Array<{ id: string }> }).tasks.map((t) => t.id);
    };
    expect(ls('--tag', 'tenant=acme')).toEqual([acme]);
    expect(ls('--tag', 'tenant=acme', '--tag', 'user=u2')).toEqual([]);
    expect(ls('--since', '1h')).toEqual([plain, globex, acme]);
    expect(ls('--until', '2020-01-01')).toEqual([]);
    expect(ls('--text', 'nightly')).toEqual([plain]);

    const table = runCli(['ls', '--db', db, '--tag', 'tenant=globex']);
    expect(table.out).toMatch(new RegExp(`${globex}\\s+triple@1\\s+pending\\s+tenant=globex`));
    expect(runCli(['show', globex, '--db', db]).out).toMatch(/tags\s+tenant=globex/);

    const bad = runCli(['ls', '--db', db, '--tag', 'tenant']);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('--tag takes key=value');
    const badTime = runCli(['ls', '--db', db, '--since', 'yesterday']);
    expect(badTime.code).not.toBe(0);
    expect(badTime.err).toContain('--since takes a duration back from now');
    const badKey = runCli(['start', 'triple', '--input', '{}', '--db', db, '--tag', '9x=1']);
    expect(badKey.code).not.toBe(0);
    expect(badKey.err).toContain('is not a tag key');
    // Each command-line run is a process of its own (several seconds on a busy machine).
  }, 120_000);
});

describe('stepwise drift, and retry --from-step first-drift --module', () => {
  it("reports the tasks whose model calls the module's code makes otherwise, and re-runs one from its first drift", async () => {
    const db = `sqlite:${join(tempDir(), 'drift.db')}`;
    const module = 'test/fixtures/drift-workflows.ts';
    const engine = new Engine({ store: db, workflows: [summary] });
    const worker = engine.worker({ concurrency: 1, pollIntervalMs: 20 });
    await worker.start();
    try {
      const { id } = await engine.start(summary, { doc: 'tides' });
      expect(await engine.result(id, { timeout: '20s' })).toBe('answer 1');
      const edited = { STEPWISE_TEST_PROMPT: 'Summarise in one line' };

      const same = runCli(['drift', module, id, '--db', db]);
      expect(same.code, same.err).toBe(0);
      expect(same.out).toContain('no drift');
      const one = runCli(['drift', module, id, '--db', db], edited);
      expect(one.code, one.err).toBe(0);
      expect(one.out).toContain('1 drifted model call(s)');
      expect(one.out).toContain(`stepwise retry ${id} --from-step summarise`);
      const all = runCli(['drift', module, '--workflow', 'summary', '--status', 'succeeded', '--db', db, '--json'], edited);
      expect(all.code, all.err).toBe(0);
      expect(JSON.parse(all.out)).toMatchObject({ checked: 1, drifted: [{ taskId: id, firstDrift: 'summarise' }], unreplayable: [] });

      const noModule = runCli(['retry', id, '--from-step', 'first-drift', '--db', db]);
      expect(noModule.code).not.toBe(0);
      expect(noModule.err).toContain('--module');
      expect(runCli(['drift', '--db', db]).err).toContain('Missing workflow module');
      expect(runCli(['drift', module, '--bogus', '--db', db]).code).not.toBe(0);
      // A task id and list filters together: refused, not half-ignored.
      const mixed = runCli(['drift', module, id, '--status', 'failed', '--db', db]);
      expect(mixed.code).not.toBe(0);
      expect(mixed.err).toContain('--status');
      // bulk retry from each task's first drift replays against --module's code (a dry run counts).
      const bulkDry = runCli(['bulk', 'retry', '--workflow', 'summary', '--from-step', 'first-drift', '--module', module, '--db', db, '--json'], edited);
      expect(bulkDry.code, bulkDry.err).toBe(0);
      expect(JSON.parse(bulkDry.out)).toMatchObject({ dryRun: true, matched: 1, acted: 1 });

      const rerun = runCli(['retry', id, '--from-step', 'first-drift', '--module', module, '--as', 'ops', '--db', db], edited);
      expect(rerun.code, rerun.err).toBe(0);
      expect(await engine.result(id, { timeout: '20s' })).toBe('answer 2');
      const entry = (await engine.get(id)).history.find((h) => h.type === 'transition' && h.event === 'retry');
      expect(entry).toMatchObject({ actor: { id: 'ops' }, detail: { fromStep: 'summarise' } });

      // --compensate: the re-run undoes the steps from there on first (this workflow has no compensation to run).
      const undo = runCli(['retry', id, '--from-step', 'summarise', '--compensate', '--db', db, '--json']);
      expect(undo.code, undo.err).toBe(0);
      expect(await engine.result(id, { timeout: '20s' })).toBe('answer 3');
      const undoEntry = (await engine.get(id)).history.filter((h) => h.type === 'transition' && h.event === 'retry').at(-1);
      expect(undoEntry).toMatchObject({ detail: { fromStep: 'summarise', compensate: true, undoing: ['summarise'] } });
    } finally {
      await worker.stop();
      await engine.close();
    }
    // Ten command-line runs, each a process of its own: slow on a busy machine.
  }, 120_000);
});
