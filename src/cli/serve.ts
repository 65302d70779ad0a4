/**
 * @module cli/serve
 * `stepwise serve [module] [--port N] [--host H] [--db URL] [--auth FILE] [--with-worker] [--log F]`: the HTTP
 * API and dashboard on one port. Tokens come from `--auth FILE` (JSON) or `STEPWISE_TOKENS`
 * (`name:role:token,...`); the server refuses to start without any. With a workflow module the
 * server knows the definitions (inputs and signals are checked against their schemas before they
 * are stored), and `--with-worker` also runs them in this process. Logs are pino JSON lines on
 * standard output (`--log pretty`: readable lines, `--log none`: no log; no token is ever logged);
 * SIGINT/SIGTERM stop it gracefully.
 */
import { Engine, InvalidArgumentError, type Workflow } from '../index.ts';
import { createLogObserver, createServer, createTracingObserver, parseTokenList, readTokenFile, ServerMetrics } from '../server/index.ts';
import { logFormat, type CommandContext } from './context.ts';
import { createCliLogger } from './logging.ts';
import { loadWorkflows } from './load-module.ts';
import { payloadOptionsFromEnv } from './payload-env.ts';

function port(v: string | undefined): number {
  if (v === undefined) return 8080;
  const n = Number(v);
  if (!/^\d+$/.test(v) || n > 65535) throw new InvalidArgumentError(`--port must be a port number 0-65535, got "${v}".`);
  return n;
}

export async function serve(ctx: CommandContext): Promise<void> {
  const file = typeof ctx.options.auth === 'string' ? ctx.options.auth : undefined;
  const tokens = file !== undefined ? readTokenFile(file) : parseTokenList(process.env.STEPWISE_TOKENS ?? '');
  if (!tokens.length) {
    throw new InvalidArgumentError(
      'No tokens: give --auth FILE (JSON [{ "name", "role", "token" }]) or STEPWISE_TOKENS="name:role:token,...". The server never runs without authentication.',
    );
  }
  const format = logFormat(ctx, 'json');
  const listenPort = port(typeof ctx.options.port === 'string' ? ctx.options.port : undefined);
  const host = typeof ctx.options.host === 'string' ? ctx.options.host : '127.0.0.1';
  const workflows: Workflow[] = ctx.args[0] ? await loadWorkflows(ctx.args[0]) : [];
  if (ctx.options['with-worker'] && !workflows.length) throw new InvalidArgumentError('--with-worker needs the workflow module: stepwise serve <module> --with-worker.');
  const logger = createCliLogger(format, ctx.out);
  const metrics = new ServerMetrics();
  const engine = new Engine({
    store: ctx.db,
    ...payloadOptionsFromEnv(),
    workflows,
    observers: [
      createLogObserver(logger),
      metrics.observer,
      ...(await createTracingObserver().then(
        (o) => [o],
        () => [],
      )),
    ],
  });
  await engine.ready();
  const worker = ctx.options['with-worker'] ? engine.worker() : null;
  const server = createServer(engine, { tokens, logger, metrics });
  const listening = await server.listen({ port: listenPort, hostname: host });
  if (worker) await worker.start();
  logger.info({ msg: 'listening', url: listening.url, identities: tokens.map((t) => `${t.name} (${t.role})`), workflows: workflows.map((w) => w.name), worker: worker !== null });
  await new Promise<void>((resolve) => {
    let stopping = false;
    const stop = (sig: string): void => {
      if (stopping) process.exit(130);
      stopping = true;
      logger.info({ msg: 'stopping', signal: sig });
      void listening
        .close()
        .then(() => engine.close())
        .then(resolve, resolve);
    };
    process.on('SIGINT', () => stop('SIGINT'));
    process.on('SIGTERM', () => stop('SIGTERM'));
  });
}
