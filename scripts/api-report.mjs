// The public API of each entry point (`.`, `./ai`, `./testing`, `./server`, `./sqlite`, `./client`,
// `./postgres`), as API Extractor reports it from the declarations tsc emits: one report per
// entry in api/, checked in, so that a change to the surface shows in review.
//
//   node scripts/api-report.mjs          writes the reports (npm run api:update)
//   node scripts/api-report.mjs --check  fails when a report differs from the code (npm run api:check)
//
// The declarations are emitted into a temporary folder (not dist/, which `npm pack` and the
// build also write; not under node_modules/, whose files API Extractor takes for other packages'),
// with the project's own tsconfig: what `npm run build` would ship.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Extractor, ExtractorConfig } = require('@microsoft/api-extractor');

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');

/** Entry point (its declaration file under the output folder) → report file name. */
const ENTRIES = {
  'index.d.ts': 'stepwise-engine.api.md',
  'ai/index.d.ts': 'stepwise-engine-ai.api.md',
  'testing/index.d.ts': 'stepwise-engine-testing.api.md',
  'server/index.d.ts': 'stepwise-engine-server.api.md',
  'sqlite/index.d.ts': 'stepwise-engine-sqlite.api.md',
  'postgres/index.d.ts': 'stepwise-engine-postgres.api.md',
  'client/index.d.ts': 'stepwise-engine-client.api.md',
};

const out = mkdtempSync(join(tmpdir(), 'stepwise-api-'));
try {
  execFileSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(root, 'tsconfig.json'), '--emitDeclarationOnly', '--sourceMap', 'false', '--outDir', out], {
    cwd: root,
    stdio: 'inherit',
  });
  const base = ExtractorConfig.loadFile(join(root, 'api/api-extractor.json'));
  let failed = 0;
  for (const [entry, reportFileName] of Object.entries(ENTRIES)) {
    const main = join(out, entry);
    const configObject = {
      ...base,
      projectFolder: root,
      mainEntryPointFilePath: main,
      compiler: { overrideTsconfig: { ...base.compiler.overrideTsconfig, files: [main] } },
      apiReport: { ...base.apiReport, reportFileName, reportTempFolder: join(out, '.api-temp') },
    };
    const config = ExtractorConfig.prepare({ configObject, configObjectFullPath: join(root, 'api/api-extractor.json'), packageJsonFullPath: join(root, 'package.json') });
    const result = Extractor.invoke(config, { localBuild: !check, showVerboseMessages: false, messageCallback: quiet });
    if (!result.succeeded || (check && result.apiReportChanged)) {
      failed++;
      console.error(`api/${reportFileName}: ${result.apiReportChanged ? 'the public API differs from the report' : `${result.errorCount} errors, ${result.warningCount} warnings`}`);
    } else if (!check && result.apiReportChanged) {
      console.log(`api/${reportFileName}: updated`);
    }
  }
  if (failed) {
    console.error(check ? 'The public API changed: review the difference, then run `npm run api:update` and commit api/.' : 'API Extractor failed.');
    process.exitCode = 1;
  } else if (check) {
    console.log(`The public API matches api/ (${Object.keys(ENTRIES).length} entry points).`);
  }
} finally {
  rmSync(out, { recursive: true, force: true });
}

/** Prints warnings and errors only (not API Extractor's progress lines). */
function quiet(message) {
  if (message.logLevel === 'info' || message.logLevel === 'verbose') message.handled = true;
}
