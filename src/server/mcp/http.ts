/**
 * @module server/mcp/http
 * The MCP server over streamable HTTP at `/mcp`: stateless, one MCP server per request, acting as
 * the request's authenticated identity (its bearer token, as on the HTTP API), answering in JSON.
 * Loaded on the first request, so a server nobody reaches over MCP never loads the SDK.
 */
import { readFileSync } from 'node:fs';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { Engine } from '../../index.ts';
import type { Identity } from '../auth.ts';
import type { SummaryLimits } from '../summaries.ts';
import { stepwiseMcpServer } from './tools.ts';

/** The package's version, named to MCP clients (the same path from src/ and dist/). */
export const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export async function handleMcp(engine: Engine, identity: Identity, limits: SummaryLimits, request: Request): Promise<Response> {
  const server = stepwiseMcpServer(engine, { identity, limits, version: PACKAGE_VERSION });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    return await transport.handleRequest(request);
  } finally {
    await server.close();
  }
}
