/**
 * @module cli/load-module
 * Loads the user's workflow module for `stepwise worker <module>`: every exported workflow (also
 * inside exported arrays or objects) is registered. TypeScript modules are loaded through tsx
 * when it is installed.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgumentError, isWorkflow, type Workflow } from '../index.ts';

export async function loadWorkflows(modulePath: string): Promise<Workflow[]> {
  const file = resolve(modulePath);
  if (!existsSync(file)) throw new InvalidArgumentError(`Module not found: ${modulePath}`);
  const mod = (await (isTypeScript(file) && !process.execArgv.some((a) => a.includes('tsx')) ? importTypeScript(file, modulePath) : import(pathToFileURL(file).href))) as Record<string, unknown>;
  const found = new Map<string, Workflow>();
  const visit = (value: unknown, depth: number): void => {
    if (isWorkflow(value)) found.set(value.name, value);
    else if (depth < 2 && Array.isArray(value)) value.forEach((v) => visit(v, depth + 1));
    else if (depth < 2 && value && typeof value === 'object') Object.values(value).forEach((v) => visit(v, depth + 1));
  };
  for (const value of Object.values(mod)) visit(value, 0);
  if (!found.size) throw new InvalidArgumentError(`${modulePath} exports no workflows: export the values returned by workflow(name, fn).`);
  return [...found.values()];
}

const isTypeScript = (file: string): boolean => /\.(c|m)?tsx?$/.test(file);

/**
 * A TypeScript module through tsx's `tsImport`, which also loads one that its package makes
 * CommonJS (a project without `"type": "module"`, as `npm init` makes it): registering tsx's ESM
 * hooks alone leaves Node to load such a file as CommonJS, which then fails on its imports.
 */
async function importTypeScript(file: string, modulePath: string): Promise<unknown> {
  let api: { tsImport: (specifier: string, parentURL: string) => Promise<unknown> };
  try {
    api = (await import('tsx/esm/api')) as typeof api;
  } catch {
    throw new InvalidArgumentError(`${modulePath} is TypeScript: install tsx (npm install -D tsx) or point the worker at compiled JavaScript.`);
  }
  return api.tsImport(pathToFileURL(file).href, import.meta.url);
}
