#!/usr/bin/env node
// Structure check run by `npm test` (docs/architecture.md, "Layers"):
// - no import cycle among the modules of src/ (type-only imports included: a cycle of types is
//   still a cycle of knowledge);
// - imports go down the layers only (LAYERS below: a module may import its own layer and lower ones);
// - no file in src/ over MAX_FILE_LINES lines, no function over MAX_FUNCTION_LINES (generated code aside).
// Prints every finding and exits 1 if there is one. `--report` prints the largest files and
// functions as well. `--root <dir>` checks `<dir>/src` against `<dir>/scripts/layers.json` (the
// tests point it at small fixture trees); `--layers <file>` names another layer table.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

function option(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const ROOT = resolve(option('--root') ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
const SRC = join(ROOT, 'src');
const LAYERS_FILE = resolve(option('--layers') ?? join(ROOT, 'scripts', 'layers.json'));
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
const IGNORED = ['generated/'];

/**
 * Layers, lowest first. A module belongs to the first entry whose prefix its path (relative to
 * src/, forward slashes) starts with; a module matching none is reported.
 */
export const LAYERS = JSON.parse(readFileSync(LAYERS_FILE, 'utf8'));

const report = process.argv.includes('--report');
const findings = [];

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...walk(path));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const rel = (path) => relative(SRC, path).split(sep).join('/');
const files = walk(SRC).filter((f) => !IGNORED.some((p) => rel(f).startsWith(p)));

function layerOf(path) {
  const r = rel(path);
  for (let i = 0; i < LAYERS.length; i++) {
    if (LAYERS[i].modules.some((p) => p === '' || (p.endsWith('/') ? r.startsWith(p) : r === p))) return i;
  }
  return -1;
}

const graph = new Map();
const sizes = [];
const functions = [];
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
  sizes.push({ file: rel(file), lines });
  const deps = new Set();
  const visit = (node) => {
    let spec;
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      spec = node.moduleSpecifier.text;
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      spec = node.arguments[0].text;
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      spec = node.argument.literal.text;
    }
    if (spec && spec.startsWith('.')) {
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (!IGNORED.some((p) => rel(target).startsWith(p))) deps.add(target);
    }
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessor(node) ||
      ts.isSetAccessor(node)
    ) {
      if (node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.end).line;
        const name = node.name && ts.isIdentifier(node.name) ? node.name.text : ts.isArrowFunction(node) || ts.isFunctionExpression(node) ? nameOfExpression(node) : '(anonymous)';
        functions.push({ file: rel(file), line: start + 1, name, lines: end - start + 1 });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  graph.set(file, deps);
}

function nameOfExpression(node) {
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  return '(anonymous)';
}

// Cycles: Tarjan's strongly connected components.
let index = 0;
const stack = [];
const onStack = new Set();
const idx = new Map();
const low = new Map();
const components = [];
function strong(v) {
  idx.set(v, index);
  low.set(v, index);
  index++;
  stack.push(v);
  onStack.add(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!idx.has(w)) {
      strong(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) === idx.get(v)) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1 || (graph.get(v) ?? new Set()).has(v)) components.push(component);
  }
}
for (const v of graph.keys()) if (!idx.has(v)) strong(v);
for (const component of components) {
  findings.push(`import cycle of ${component.length} modules: ${component.map(rel).sort().join(', ')}`);
}

let upward = 0;
for (const [file, deps] of graph) {
  const from = layerOf(file);
  if (from < 0) {
    findings.push(`${rel(file)}: in no layer of ${relative(ROOT, LAYERS_FILE).split(sep).join('/')}`);
    continue;
  }
  for (const dep of deps) {
    const to = layerOf(dep);
    if (to > from) {
      upward++;
      findings.push(`${rel(file)} (layer ${LAYERS[from].name}) imports ${rel(dep)} (layer ${LAYERS[to].name}), a higher layer`);
    }
  }
}

for (const { file, lines } of sizes) if (lines > MAX_FILE_LINES) findings.push(`${file}: ${lines} lines (at most ${MAX_FILE_LINES})`);
for (const f of functions) if (f.lines > MAX_FUNCTION_LINES) findings.push(`${f.file}:${f.line} ${f.name}: ${f.lines} lines (at most ${MAX_FUNCTION_LINES})`);

if (report) {
  console.log('largest files:');
  for (const s of sizes.sort((a, b) => b.lines - a.lines).slice(0, 15)) console.log(`  ${s.lines}\t${s.file}`);
  console.log('longest functions:');
  for (const f of functions.sort((a, b) => b.lines - a.lines).slice(0, 20)) console.log(`  ${f.lines}\t${f.file}:${f.line} ${f.name}`);
  console.log(`upward imports: ${upward}; cycles: ${components.length}`);
}
if (findings.length > 0) {
  console.error(`structure check: ${findings.length} finding(s)`);
  for (const f of findings) console.error(`  ${f}`);
  process.exit(1);
}
console.log(`structure check: ${files.length} modules, no cycle, no upward import, files ≤ ${MAX_FILE_LINES} lines, functions ≤ ${MAX_FUNCTION_LINES} lines`);
