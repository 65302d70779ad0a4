// The documentation cannot drift from the API: every ```ts / ```typescript block of README.md and
// docs/*.md is type-checked against the package's source, in one TypeScript program (each block a
// virtual module; `stepwise-engine` and its subpaths mapped to src/ through `paths`). Names the
// prose assumes (a model client `llm`, a `cms`, an `engine` made earlier on the page) are declared
// once in PRELUDE below. A block that is deliberately not a whole program is marked
// ```ts fragment and skipped (the test's title says how many).
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`),
];
// Virtual files live in a folder of the repository so that its package.json ("type": "module")
// makes them ES modules (top-level await) and node_modules resolves as for a user's file.
const VIRTUAL_DIR = join(ROOT, 'docs', '.code-blocks');
const PRELUDE_FILE = join(VIRTUAL_DIR, 'prelude.d.ts');

/** What the documentation's prose assumes exists: the user's own clients and values made earlier on a page. */
const PRELUDE = `
declare const engine: import('stepwise-engine').Engine;
declare const store: import('stepwise-engine').Store;
declare const workflows: import('stepwise-engine').Workflow<any, any>[];
declare const fn: import('stepwise-engine').WorkflowFunction<any, any>;
declare const ctx: import('stepwise-engine').WorkflowContext;
declare const publish: import('stepwise-engine').Workflow<{ topic: string }, { published: boolean }>;
declare const publishV2: typeof publish;
declare const taskId: string;
declare const approvalId: string;

// The user's own clients and fakes.
declare const llm: {
  write(topic: string, options: { signal: AbortSignal; idempotencyKey: string; repair?: string }): Promise<string>;
  reset(): void;
};
declare const cms: { publish(draft: string, options?: { idempotencyKey: string }): Promise<{ url: string }>; reset(): void; pages: string[] };
declare const slack: { post(text: string, options: { idempotencyKey: string }): Promise<void>; posts: string[] };
declare const psp: { charge(order: { amount: number }, options: { idempotencyKey: string }): Promise<{ id: string }> };
declare const openai: import('openai').OpenAI;
declare const req: import('openai').OpenAI.ChatCompletionCreateParamsNonStreaming;
type Message = { role: 'system' | 'user' | 'assistant'; content: string };
declare const prompt: Message;
declare function asAssistant(output: unknown): Message;
declare function asUser(text: string): Message;
declare function complete(messages: Message[]): Promise<string>;
declare const Summary: import('zod').ZodType<{ title: string; points: string[] }>;
declare function parseInvoice(pdf: Uint8Array): Promise<number>;

// Values a page made in its prose before the block.
declare const draft: string;
declare const rows: { id: string; cents: number }[];
declare const orderId: string;
declare const order: { amount: number };
declare const pdf: Uint8Array;
`;

interface Block {
  page: string;
  line: number;
  file: string;
  code: string;
}

/** The ```ts blocks of one Markdown text, and how many of them are marked fragment. */
export function extractBlocks(page: string, text: string): { blocks: Block[]; fragments: number } {
  const blocks: Block[] = [];
  let fragments = 0;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    let end = i + 1;
    while (end < lines.length && !lines[end]!.startsWith('```')) end++;
    const [, lang, info] = open;
    if (lang === 'ts' || lang === 'typescript') {
      if (/\bfragment\b/.test(info!)) fragments++;
      else {
        const file = join(VIRTUAL_DIR, `${page.replace(/[/.]/g, '_')}_L${i + 1}.ts`);
        blocks.push({ page, line: i + 1, file, code: `${lines.slice(i + 1, end).join('\n')}\nexport {};\n` });
      }
    }
    i = end;
  }
  return { blocks, fragments };
}

function compilerOptions(): ts.CompilerOptions {
  const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  return {
    ...parsed.options,
    noEmit: true,
    declaration: false,
    sourceMap: false,
    noUnusedLocals: false,
    noUnusedParameters: false,
    rootDir: ROOT,
    paths: {
      'stepwise-engine': [join(ROOT, 'src/index.ts')],
      'stepwise-engine/*': [join(ROOT, 'src/*/index.ts')],
    },
  };
}

/** Type-checks the given virtual files in one program; the diagnostics of each, as text. */
export function checkBlocks(files: Map<string, string>): Map<string, string[]> {
  const options = compilerOptions();
  const host = ts.createCompilerHost(options, true);
  const { getSourceFile, fileExists, readFile } = host;
  host.fileExists = (name) => files.has(name) || fileExists.call(host, name);
  host.readFile = (name) => files.get(name) ?? readFile.call(host, name);
  host.getSourceFile = (name, language, ...rest) => {
    const text = files.get(name);
    return text === undefined ? getSourceFile.call(host, name, language, ...rest) : ts.createSourceFile(name, text, language, true);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const out = new Map<string, string[]>();
  for (const name of files.keys()) {
    const source = program.getSourceFile(name)!;
    const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
    out.set(
      name,
      diagnostics.map((d) => {
        const at = d.start === undefined ? '' : `line ${source.getLineAndCharacterOfPosition(d.start).line + 1}: `;
        return `${at}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      }),
    );
  }
  return out;
}

const FIXTURE_FILE = join(VIRTUAL_DIR, 'fixture_unknown_export.ts');
// A stale name: the program must refuse it, and only it (so both modules resolved to src/).
const FIXTURE = [
  "import { workflow, notAnExportOfStepwise } from 'stepwise-engine';",
  "import { checkResume } from 'stepwise-engine/testing';",
  "export const w = workflow('x', async () => notAnExportOfStepwise);",
  'export const c = checkResume;',
].join('\n');

const pages = PAGES.map((page) => extractBlocks(page, readFileSync(join(ROOT, page), 'utf8')));
const blocks = pages.flatMap((p) => p.blocks);
const fragments = pages.reduce((n, p) => n + p.fragments, 0);

describe(`documentation code blocks: ${blocks.length} type-checked, ${fragments} marked fragment skipped`, () => {
  let results: Map<string, string[]>;
  beforeAll(() => {
    const files = new Map<string, string>([
      [PRELUDE_FILE, PRELUDE],
      [FIXTURE_FILE, FIXTURE],
    ]);
    for (const block of blocks) files.set(block.file, block.code);
    results = checkBlocks(files);
  }, 120_000);

  it('finds the blocks of the README and docs/', () => {
    expect(blocks.length).toBeGreaterThan(10);
  });

  it('fails a block that imports a name the API does not export (fixture)', () => {
    const errors = results.get(FIXTURE_FILE)!;
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^line 1: .*has no exported member.*'notAnExportOfStepwise'/);
  });

  it('the prelude itself compiles', () => {
    expect(results.get(PRELUDE_FILE)).toEqual([]);
  });

  it.each(blocks.map((b) => [`${b.page}:${b.line}`, b] as const))('%s compiles', (_where, block) => {
    const errors = results.get(block.file)!;
    expect(errors, `${block.page}, block at line ${block.line} (mark it \`\`\`ts fragment if it is not a whole program):\n${errors.join('\n')}`).toEqual([]);
  });
});
