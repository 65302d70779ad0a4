// Helpers for the server tests: a token set with one identity per role, and requests to a
// server's app without a port (`app.request`), authenticated as one of them.
import type { StepwiseServer } from '../../src/server/index.ts';
import type { TokenEntry } from '../../src/server/auth.ts';

export const TOKENS: TokenEntry[] = [
  { name: 'vera', role: 'viewer', token: 'viewer-token-0123456789' },
  { name: 'oscar', role: 'operator', token: 'operator-token-0123456789' },
  { name: 'alice', role: 'approver', token: 'approver-token-0123456789' },
  { name: 'ada', role: 'admin', token: 'admin-token-0123456789abc' },
];

export const tokenOf = (name: string): string => (TOKENS.find((t) => t.name === name) as TokenEntry).token;

export interface CallOptions {
  as?: string | null;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
}

/** One request to the server's app; `as: null` sends no token. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function call(server: StepwiseServer, method: string, path: string, options: CallOptions = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  const as = options.as === undefined ? 'ada' : options.as;
  if (as !== null) headers.authorization = `Bearer ${tokenOf(as)}`;
  const body = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const res = await server.app.request(`http://localhost${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON (metrics, HTML)
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
