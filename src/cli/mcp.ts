/**
 * @module cli/mcp
 * `stepwise mcp`: the MCP server over standard input and output, for a coding agent on this machine
 * (Claude Desktop, Claude Code, Cursor: their config names this command). It acts as `--as NAME`
 * (default "mcp") with `--role` (default operator: read, cancel, retry, fork; `approver` or `admin`
 * may decide). `--module FILE` gives it the workflows' code, which `task_drift` and a re-run from
 * 'first-drift' replay. Nothing else is written to standard output: it carries the protocol.
 */
import { InvalidArgumentError } from '../index.ts';
import { str, withEngine, type CommandContext } from './context.ts';
import { moduleFlag } from './drift.ts';

const ROLES = ['viewer', 'operator', 'approver', 'admin'] as const;

export async function mcp(ctx: CommandContext): Promise<void> {
  const role = (str(ctx.options, 'role') ?? 'operator') as (typeof ROLES)[number];
  if (!ROLES.includes(role)) throw new InvalidArgumentError(`stepwise mcp: --role must be one of ${ROLES.join(', ')}, got "${role}".`);
  const name = str(ctx.options, 'as') ?? 'mcp';
  const workflows = await moduleFlag(ctx);
  const [{ StdioServerTransport }, { stepwiseMcpServer }, { PACKAGE_VERSION }] = await Promise.all([
    import('@modelcontextprotocol/sdk/server/stdio.js'),
    import('../server/mcp/tools.ts'),
    import('../server/mcp/http.ts'),
  ]);
  await withEngine(
    ctx,
    async (engine) => {
      const server = stepwiseMcpServer(engine, { identity: { name, role }, limits: { valueBytes: 4096, bodyBytes: 4 * 1024 * 1024 }, version: PACKAGE_VERSION });
      const transport = new StdioServerTransport();
      const closed = new Promise<void>((resolve) => {
        transport.onclose = () => resolve();
        process.stdin.once('end', () => resolve());
      });
      await server.connect(transport);
      await closed;
      await server.close();
    },
    false,
    workflows,
  );
}
