// examples/content-pipeline: generate → (risk rule) review → publish (idempotent CMS call) → notify.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir } from './support/engine.ts';

const root = new URL('..', import.meta.url).pathname;

describe('content-pipeline example', () => {
  it('publishes a low-impact change at once, a high-impact one after an editor approves it (once, despite a retried CMS call), and tells the initiator why a rejected one was not', () => {
    const cwd = tempDir();
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const r = spawnSync(process.execPath, ['--import', tsx, join(root, 'examples/content-pipeline/main.ts')], {
      cwd,
      env: { ...process.env, NO_COLOR: '1' },
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('→ published art-1: low impact: published without review');
    expect(r.stdout).toMatch(/✉ to editor: please review "New prices from March"[\s\S]*approve: stepwise approve apv_\w+ --as editor/);
    expect(r.stdout).toContain('✉ to dana: "editorial-review" was approved by editor — "Added the VAT note."');
    expect(r.stdout).toContain('→ published art-2: approved by editor; the publish step took 2 attempts, the CMS holds 1 copy');
    expect(r.stdout).toContain('✉ to sam: "editorial-review" was rejected by editor — "Legal has not signed off yet."');
    expect(r.stdout).toMatch(/"published":false,"reason":"rejected by editor: Legal has not signed off yet\."/);
    expect(r.stdout).toContain('The CMS received 3 requests and holds 2 articles: art-1 "Fix typo on the pricing page", art-2 "New prices from March".');
  }, 120_000);
});
