// The public surface of every entry point matches its checked-in report in api/ (API Extractor
// over the declarations tsc emits). A change to the surface fails here until `npm run api:update`
// rewrites the report, so that the change shows in review.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;

describe('the public API', () => {
  it('matches the reports in api/ (npm run api:check)', () => {
    const r = spawnSync(process.execPath, ['scripts/api-report.mjs', '--check'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  }, 150_000);
});
