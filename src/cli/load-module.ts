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
  if (/\.(c|m)?tsx?$/.test(file) && !process.execArgv.some((a) => a.includes('tsx'))) {
    try {
      const api = (await import('tsx/esm/api')) as { register: () => unknown };
      api.register();
    } catch {
      throw new InvalidArgumentError(`${modulePath} is TypeScript: install tsx (npm install -D tsx) or point the worker at compiled JavaScript.`);
    }
  }
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
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
