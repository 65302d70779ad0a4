// The published package as a user gets it: `npm pack`, the tarball installed into a fresh project,
// a consumer type-checked with skipLibCheck: false (every .d.ts we ship must stand on its own) and
// run against an embedded SQLite file.
import { describe, expect, it } from 'vitest';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventually, tempDir } from './support/engine.ts';

const root = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string; bin: Record<string, string>; dependencies?: Record<string, string> };

const CONSUMER = `
import { Engine, workflow, isStepwiseError, type TaskEvent, type Observer } from '${pkg.name}';
import { SqliteStore, type SqliteStoreOptions } from '${pkg.name}/sqlite';
import type { PostgresStoreOptions } from '${pkg.name}/postgres';
import { ManualClock } from '${pkg.name}/testing';

const greet = workflow('greet', async (ctx, input: { name: string }) => {
  const text = await ctx.step('compose', () => \`hello \${input.name}\`);
  await ctx.sleep('pause', 1);
  return { text };
});

const options: SqliteStoreOptions = { synchronous: 'NORMAL' };
const pgOptions: PostgresStoreOptions = { schema: 'app' };
const seen: TaskEvent['type'][] = [];
const observer: Observer = { onEvent: (e) => void seen.push(e.type) };
const engine = new Engine({ store: new SqliteStore(process.argv[2] as string, options), workflows: [greet], observers: [observer] });
const worker = engine.worker({ concurrency: 2 });
await worker.start();
const { id } = await engine.start('greet', { name: 'world' });
const out = (await engine.result(id, { timeout: '20s' })) as { text: string };
await worker.stop();
await engine.close();
const clock = new ManualClock(0);
console.log(JSON.stringify({ out, clock: clock.now(), pg: pgOptions.schema, coded: isStepwiseError(new Error('x')), logged: seen.includes('step:completed') }));
`;

/**
 * A workflow module as a project writes it (TypeScript, `import` syntax). `shared` tells whether
 * the module's imports are the engine the worker runs: the failure the engine hands the code is an
 * instance of the class the module imported only if there is one copy of the engine.
 */
const WORKFLOWS = `
import { workflow, NonRetryableError, StepFailedError } from '${pkg.name}';
export const order = workflow('order', async (ctx, input: { orderId: string }) =>
  ctx.step('charge', ({ idempotencyKey }) => ({ charged: idempotencyKey }), { key: (i: { orderId: string }) => \`charge:\${i.orderId}\` }));
export const shared = workflow('shared', async (ctx) => {
  try {
    await ctx.step('refused', () => { throw new NonRetryableError('no'); });
    return { caught: false };
  } catch (e) {
    return { caught: true, sameEngine: e instanceof StepFailedError };
  }
});
`;

/** What `start --wait --json` prints of a finished task, as far as these checks read it. */
type Finished = { output: unknown; steps: Array<{ error: { stack?: string } | null }> };

describe(`the published package (${pkg.name})`, () => {
  it('packs, installs into a fresh project, type-checks with skipLibCheck: false and runs', async () => {
    const dir = tempDir();
    // `npm pack` runs the build (prepare), so the tarball holds what the sources build to now.
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const [{ filename, files }] = JSON.parse(packed.slice(packed.indexOf('['))) as [{ filename: string; files: Array<{ path: string }> }];
    const paths = files.map((f) => f.path);
    expect(paths).toContain('dist/index.d.ts');
    expect(paths).toContain('dist/cli/main.js');
    // The `./ai` subpath (its peers `ai` and `openai` are optional: only its users install them).
    expect(paths).toContain('dist/ai/index.d.ts');
    expect(paths).toContain('dist/ai/index.js');
    expect(paths.some((p) => p.startsWith('src/') || p.startsWith('test/'))).toBe(false);

    const project = join(dir, 'app');
    const installed = join(project, 'node_modules', pkg.name);
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', join(dir, filename), '-C', installed, '--strip-components=1']);
    // The package's own dependencies and the consumer's type packages, as npm would install them
    // (linked from this checkout: no network, and better-sqlite3 need not compile again).
    for (const dep of dependencyClosure([...Object.keys(pkg.dependencies ?? {}), 'tsx', 'pg', '@types/better-sqlite3', '@types/node', '@types/pg'])) {
      const target = join(root, 'node_modules', dep);
      const link = join(project, 'node_modules', dep);
      mkdirSync(join(link, '..'), { recursive: true });
      try {
        symlinkSync(target, link, 'dir');
      } catch {
        // optional packages this checkout does not have
      }
    }
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'app', type: 'module', private: true }));
    writeFileSync(join(project, 'main.ts'), CONSUMER);
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          skipLibCheck: false,
          outDir: 'out',
          types: ['node'],
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
        },
        include: ['main.ts'],
      }),
    );
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', project], { encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr, 'type errors in the shipped declarations or the consumer').toBe('');
    expect(readdirSync(join(project, 'out'))).toContain('main.js');

    const run = spawnSync(process.execPath, [join(project, 'out/main.js'), join(dir, 'app.db')], { cwd: project, encoding: 'utf8', timeout: 60_000 });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout.trim())).toEqual({ out: { text: 'hello world' }, clock: 0, pg: 'app', coded: false, logged: true });

    const binPath = join(installed, pkg.bin.stepwise as string);
    const bin = spawnSync(process.execPath, [binPath, 'version'], { encoding: 'utf8' });
    expect(bin.stdout.trim()).toBe(pkg.version);

    // `stepwise worker workflows.ts` in a project `npm init` made (CommonJS: no "type": "module"),
    // with tsx installed beside the package, and in the ES-module project above.
    const cjs = join(dir, 'cjs-app');
    mkdirSync(join(cjs, 'node_modules'), { recursive: true });
    symlinkSync(installed, join(cjs, 'node_modules', pkg.name), 'dir');
    writeFileSync(join(cjs, 'package.json'), JSON.stringify({ name: 'cjs-app', private: true }));
    for (const app of [cjs, project]) {
      writeFileSync(join(app, 'workflows.ts'), WORKFLOWS);
      const db = `sqlite:${join(app, 'workflows.db')}`;
      const worker = spawn(process.execPath, [binPath, 'worker', 'workflows.ts', '--db', db, '--poll-ms', '20', '--quiet'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] });
      let workerOut = '';
      worker.stdout.on('data', (d: Buffer) => (workerOut += d.toString()));
      worker.stderr.on('data', (d: Buffer) => (workerOut += d.toString()));
      const startWait = (name: string, input: string): Finished => {
        const started = spawnSync(process.execPath, [binPath, 'start', name, '--input', input, '--wait', '--json', '--db', db], { cwd: app, encoding: 'utf8', timeout: 60_000 });
        expect(started.status, `${started.stderr}\nworker: ${workerOut}`).toBe(0);
        return JSON.parse(started.stdout) as Finished;
      };
      try {
        // The worker creates the database; the CLI's start refuses to create one.
        await eventually(() => workerOut.includes('started') || worker.exitCode !== null, 60_000, 'the worker to start');
        expect(workerOut).toContain('workflows: order, shared');
        expect(startWait('order', '{"orderId":"A-17"}').output, app).toEqual({ charged: 'v1:charge:A-17' });
        const shared = startWait('shared', '{}');
        expect(shared.output, app).toEqual({ caught: true, sameEngine: true });
        // The refused step's stored stack names the workflow file (tsx runs a CommonJS-format
        // module from a data: URL holding its whole source; that is not what the journal keeps).
        const stack = shared.steps[0]?.error?.stack ?? '';
        expect(stack).toContain(join(app, 'workflows.ts'));
        expect(stack).not.toContain('data:');
      } finally {
        worker.kill('SIGKILL');
      }
    }
  }, 180_000);
});

/** The packages `names` need, as npm would install them: each with its dependencies, transitively (from this checkout's node_modules). */
function dependencyClosure(names: string[]): string[] {
  const seen = new Set<string>();
  const visit = (name: string): void => {
    if (seen.has(name)) return;
    seen.add(name);
    let manifest: { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
    try {
      manifest = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as typeof manifest;
    } catch {
      return; // an optional package this checkout does not have
    }
    for (const dep of Object.keys({ ...manifest.dependencies, ...manifest.optionalDependencies })) visit(dep);
  };
  for (const name of names) visit(name);
  return [...seen];
}
