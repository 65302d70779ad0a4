import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

// scripts/check-structure.mjs: first on tiny fixture trees (each breaks one rule), then on src/.

const SCRIPT = join(import.meta.dirname, '..', 'scripts', 'check-structure.mjs');
const LAYERS = [
  { name: 'low', modules: ['low/'] },
  { name: 'high', modules: ['high/'] },
];

function check(args: string[]): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8' });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** A fixture tree: `files` under `src/`, and the layer table in `scripts/layers.json`. */
function fixture(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'stepwise-structure-'));
  roots.push(root);
  for (const [path, text] of Object.entries({ ...files, '../scripts/layers.json': JSON.stringify(LAYERS) })) {
    const full = join(root, 'src', path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
  return root;
}

const lines = (n: number, body: string): string => Array.from({ length: n }, () => body).join('\n');

describe('check-structure on fixture trees', () => {
  it('passes a tree that keeps every rule', () => {
    const root = fixture({ 'low/a.ts': 'export const a = 1;\n', 'high/b.ts': "import { a } from '../low/a.ts';\nexport const b = a;\n" });
    const r = check(['--root', root]);
    expect(r.out).toContain('no cycle, no upward import');
    expect(r.code).toBe(0);
  });

  it('reports an import cycle, type-only imports included', () => {
    const root = fixture({
      'low/a.ts': "import { b } from './b.ts';\nexport const a = b;\n",
      'low/b.ts': "import type { a } from './a.ts';\nexport const b = 1 as unknown as typeof a;\n",
    });
    const r = check(['--root', root]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('import cycle of 2 modules: low/a.ts, low/b.ts');
  });

  it('reports an import up the layers', () => {
    const root = fixture({ 'low/a.ts': "import { b } from '../high/b.ts';\nexport const a = b;\n", 'high/b.ts': 'export const b = 1;\n' });
    const r = check(['--root', root]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('low/a.ts (layer low) imports high/b.ts (layer high), a higher layer');
  });

  it('reports a module in no layer, a long file and a long function', () => {
    const root = fixture({
      'other.ts': 'export const x = 1;\n',
      'low/long-file.ts': `${lines(401, 'export {};')}\n`,
      'low/long-function.ts': `export function long(): number {\n  let n = 0;\n${lines(80, '  n++;')}\n  return n;\n}\n`,
    });
    const r = check(['--root', root]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('other.ts: in no layer of scripts/layers.json');
    expect(r.out).toContain('low/long-file.ts: 401 lines (at most 400)');
    expect(r.out).toContain('low/long-function.ts:1 long: 84 lines (at most 80)');
  });

  it('takes another layer table with --layers', () => {
    const root = fixture({ 'low/a.ts': "import { b } from '../high/b.ts';\nexport const a = b;\n", 'high/b.ts': 'export const b = 1;\n' });
    const flat = join(root, 'flat.json');
    writeFileSync(flat, JSON.stringify([{ name: 'all', modules: [''] }]));
    const r = check(['--root', root, '--layers', flat]);
    expect(r.out).toContain('no cycle, no upward import');
    expect(r.code).toBe(0);
  });
});

describe('the structure of src/', () => {
  it('has no import cycle, no import up the layers, no file over 400 lines and no function over 80', () => {
    const r = check([]);
    expect(r.out).toContain('no cycle, no upward import');
    expect(r.code).toBe(0);
  });

  it("lets the primitives reach a run only through the kernel's operations (Run), not its state (RunCore)", () => {
    const src = join(import.meta.dirname, '..', 'src');
    const above = ['primitives', 'approvals', 'idempotency', 'failure', 'machine'].flatMap((dir) =>
      readdirSync(join(src, dir))
        .filter((f) => f.endsWith('.ts'))
        .map((f) => `${dir}/${f}`),
    );
    // The ctx assembly hands model metering (ai/meter.ts) the run as it takes it today.
    const allowed = new Set(['primitives/context.ts']);
    const reaching = above.filter((f) => !allowed.has(f) && /from '\.\.\/run\/core\.ts'/.test(readFileSync(join(src, f), 'utf8')));
    expect(reaching).toEqual([]);
  });
});
