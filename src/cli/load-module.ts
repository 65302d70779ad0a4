/**
 * @module cli/load-module
 * Loads the user's workflow module for `stepwise worker <module>`: every exported workflow (also
 * inside exported arrays or objects) is registered, and an export named `rateLimits` gives the
 * engine its rate limits (`new Engine({ rateLimits })`). TypeScript modules are loaded through tsx
 * when it is installed.
 *
 * The module must bind to the engine this process runs, not a second copy of it: with two, an
 * error the engine throws is not an instance of the class the module imported, and state kept per
 * run by one copy (a model call's usage meter, a budget's park request) is not seen by the other.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError, isWorkflow, type RateLimits, type Workflow } from '../index.ts';

export async function loadWorkflows(modulePath: string): Promise<Workflow[]> {
  return (await loadModule(modulePath)).workflows;
}

/** The module's workflows, and the engine's rate limits if it exports them (`export const rateLimits = { … }`). */
export async function loadModule(modulePath: string): Promise<{ workflows: Workflow[]; rateLimits?: RateLimits }> {
  const file = resolve(modulePath);
  if (!existsSync(file)) throw new InvalidArgumentError(`Module not found: ${modulePath}`);
  const mod = (await (isTypeScript(file) && !process.execArgv.some((a) => a.includes('tsx')) ? importTypeScript(file, modulePath) : import(pathToFileURL(file).href))) as Record<
    string,
    unknown
  >;
  const found = new Map<string, Workflow>();
  const visit = (value: unknown, depth: number): void => {
    if (isWorkflow(value)) found.set(value.name, value);
    else if (depth < 2 && Array.isArray(value)) value.forEach((v) => visit(v, depth + 1));
    else if (depth < 2 && value && typeof value === 'object') Object.values(value).forEach((v) => visit(v, depth + 1));
  };
  for (const value of Object.values(mod)) visit(value, 0);
  if (!found.size) throw new InvalidArgumentError(`${modulePath} exports no workflows: export the values returned by workflow(name, fn).`);
  const rateLimits = mod.rateLimits;
  if (rateLimits !== undefined && (typeof rateLimits !== 'object' || rateLimits === null))
    throw new InvalidArgumentError(`${modulePath}: its rateLimits export must be an object of named limits.`);
  return { workflows: [...found.values()], ...(rateLimits !== undefined ? { rateLimits: rateLimits as RateLimits } : {}) };
}

const isTypeScript = (file: string): boolean => /\.(c|m)?tsx?$/.test(file);

/**
 * A TypeScript module. One that Node loads as an ES module (`.mts`, or `.ts` in a package with
 * `"type": "module"`) is imported after tsx's hooks are registered for the process, so that its
 * imports resolve to the modules already loaded. One that Node loads as CommonJS (`.cts`, or `.ts`
 * in a package without `"type": "module"`, as `npm init` makes it) goes through tsx's `tsImport`:
 * registering the hooks alone leaves Node to load it as CommonJS, which then fails on its imports
 * of ES modules; `tsImport` compiles it to CommonJS whose requires reach the loaded modules. (Not
 * `tsImport` for both: it loads the ES modules a module imports again, as copies of their own.)
 */
async function importTypeScript(file: string, modulePath: string): Promise<unknown> {
  let api: { register: () => unknown; tsImport: (specifier: string, parentURL: string) => Promise<unknown> };
  try {
    api = (await import('tsx/esm/api')) as typeof api;
  } catch {
    throw new InvalidArgumentError(`${modulePath} is TypeScript: install tsx (npm install -D tsx) or point the worker at compiled JavaScript.`);
  }
  const url = pathToFileURL(file).href;
  if (!loadsAsModule(file)) return api.tsImport(url, import.meta.url);
  api.register();
  return import(url);
}

/** Whether Node loads `file` (TypeScript) as an ES module: by its extension, else by its package's `type`. */
export function loadsAsModule(file: string): boolean {
  if (/\.mtsx?$/.test(file)) return true;
  if (/\.ctsx?$/.test(file)) return false;
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        return (JSON.parse(readFileSync(manifest, 'utf8')) as { type?: unknown }).type === 'module';
      } catch {
        return false;
      }
    }
    if (dirname(dir) === dir) return false;
  }
}
