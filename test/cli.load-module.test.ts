// How `stepwise worker <module>` decides that a TypeScript module is an ES module (then imported
// after tsx's hooks are registered, binding to the engine already loaded) or CommonJS (loaded
// through tsx's tsImport): by its extension, else by the nearest package.json's "type".
import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadsAsModule } from '../src/cli/load-module.ts';
import { tempDir } from './support/engine.ts';

describe('loadsAsModule', () => {
  it('follows the extension: .mts is an ES module, .cts CommonJS, whatever the package says', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x' }));
    expect(loadsAsModule(join(dir, 'a.mts'))).toBe(true);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'x', type: 'module' }));
    expect(loadsAsModule(join(dir, 'a.cts'))).toBe(false);
  });

  it('reads the nearest package.json for .ts: "type": "module" or not', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'outer', type: 'module' }));
    mkdirSync(join(dir, 'src', 'deep'), { recursive: true });
    expect(loadsAsModule(join(dir, 'src', 'deep', 'workflows.ts'))).toBe(true);
    // A nested package without "type" (what npm init writes) makes its files CommonJS.
    mkdirSync(join(dir, 'pkg'));
    writeFileSync(join(dir, 'pkg', 'package.json'), JSON.stringify({ name: 'inner', type: 'commonjs' }));
    expect(loadsAsModule(join(dir, 'pkg', 'workflows.ts'))).toBe(false);
  });

  it('treats a package.json it cannot parse as CommonJS (the loader that works for both)', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'package.json'), '{ not json');
    expect(loadsAsModule(join(dir, 'workflows.tsx'))).toBe(false);
  });
});
