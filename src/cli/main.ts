#!/usr/bin/env node
/**
 * @module cli/main
 * The `stepwise` command line: parses arguments with node:util parseArgs, runs one command,
 * prints errors as one line (`stepwise: [CODE] message`) and exits non-zero.
 */
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { DEFAULT_STORE_URL, isStepwiseError } from '../index.ts';
import * as commands from './commands.ts';
import type { CommandContext } from './context.ts';
import { worker } from './worker.ts';
import * as approvalCommands from './approvals.ts';
import { alerts } from './alerts.ts';
import { drift } from './drift.ts';
import { bulk as bulkCommand } from './bulk.ts';
import { schedules } from './schedules.ts';

const HELP = `stepwise — durable execution for long-running agent tasks

Usage: stepwise <command> [arguments] [--db URL] [--json]

Commands:
  worker <module>            run the workflows exported by <module> (.js, or .ts with tsx)
        [--concurrency N] [--claim-batch N] [--lease-ms MS] [--heartbeat-ms MS] [--poll-ms MS] [--grace-ms MS] [--keep-parked N]
        [--workflows a,b] [--worker-id ID] [--quiet] [--log json|pretty|none]
  start <workflow> --input JSON|@file|- [--key K] [--wait] [--title T] [--priority N] [--tag K=V]... [--workflow-version V]
        [--debounce KEY --period D [--max-wait D]] [--singleton KEY [--join]]
                             create a task (same --key → the existing task); --wait follows it live;
                             --debounce: starts of KEY within D are one task with the last input;
                             --singleton: refused (or --join: the live task) while one of KEY runs
  start <workflow> --inputs FILE.jsonl|- [--key-field F]
                             create one task per line (each line a task's input), in one batch;
                             --key-field takes each task's idempotency key from that field of its input
  ls [--status S[,S]] [--workflow W] [--parent ID] [--tag K=V]... [--since D|DATE] [--until D|DATE]
     [--failed-with CODE] [--text T] [--limit N] [--cursor C]
                             list tasks, newest first: by tags (all must match), creation time
                             (--since 2h, --until 2026-12-01), the error code of failed tasks, text
  show <id>                  a task: steps (status, attempts, durations), its timeline, its tree of child tasks
  explain <id>               why a task is (not) moving
  cancel <id> [--reason R]   cancel (a running task stops at once: its signal fires)
  retry <id> [--from-step S] run a failed task again from the failed step, or any finished task from step S
        [--compensate]       (--compensate: a succeeded task's steps from S on are undone first, newest first)
        [--module M]         (--from-step first-drift --module M: from its first model call M's code makes otherwise)
  fork <id> [--from-step S] [--input JSON|@file|-] [--tag K=V]... [--title T] [--module M]
                             a new task that reuses <id>'s journal before step S (with another input)
  drift <module> [<id>] [--status S[,S]] [--workflow W] [--tag K=V]... [--since D] [--until D]
        [--failed-with CODE] [--text T] [--limit N] [--cursor C]
                             recorded model calls <module>'s code would make with another request
                             (prompt, model, tools, settings changed), found by replaying each task
  bulk <cancel|retry|pause|resume|delete> [--status S[,S]] [--workflow W] [--tag K=V]... [--since D] [--until D]
       [--failed-with CODE] [--text T] [--limit N] [--reason R] [--from-step S] [--compensate] [--module M] [--yes]
                             one command on every task the filters match; without --yes it only counts
  pause <id> | resume <id> [--subtree]   pause at the next step boundary / continue (--subtree: its child tasks too)
  delete <id>                delete a finished task with its steps and log (its key is free again)
  purge --older-than D [--status S[,S]] [--workflow W[,W]] [--limit N] [--dry-run]
                             delete finished tasks that ended at least D ago ('30d'); --dry-run counts
  send <id> <event> [--data JSON|@file|-] [--key K]
                             send an event to a state machine's task (refused unless its state takes it)
  signal <id> <name> [--data JSON|@file|-] [--key K] [--require-waiting]
                             send an event to ctx.waitForEvent(name); --require-waiting refuses
                             it unless the task waits for that name (catches typos)
  mcp [--as NAME] [--role viewer|operator|approver|admin] [--module M]
                             the MCP server on stdin/stdout for coding agents (tools to search, show,
                             explain, cancel, retry, fork tasks, report drift against M's code and
                             decide approvals); see docs/mcp.md
  serve [module] [--port N] [--host H] [--auth FILE] [--with-worker] [--log json|pretty|none]
                             HTTP API and dashboard (tokens from --auth FILE or STEPWISE_TOKENS
                             "name:role:token,..."; roles viewer, operator, approver, admin)
  approvals [--pending] [--status S[,S]] [--approver NAME] [--workflow W]
                             approvals across tasks (a reviewer's queue: --pending --approver NAME)
  alerts [--kind K[,K]] [--workflow W] [--task ID] [--limit N] [--cursor ID]
                             the alerts workers raised, newest first (failure-rate, crash-loop,
                             workers-gone, stuck, budget)
  approve <approval-id> --as NAME [--comment C] [--data JSON|@file|-] [--key K]
  reject <approval-id> --as NAME [--comment C] [--data JSON|@file|-] [--key K]
                             decide an approval (--key: a repeat counts once)
  schedules [ls] [--workflow W] | show <id> | pause <id> | resume <id> | trigger <id> | delete <id>
  schedules create <id> --workflow W --cron "EXPR" [--timezone Z] [--input JSON] [--overlap skip|buffer|allow|cancel]
        [--catchup D|none] [--paused]
                             cron schedules: each tick starts one task (workers fire them)
  migrate                    create or upgrade the schema and exit
  version                    print the version

Options:
  --db URL     sqlite:<path> or postgres://…  (env STEPWISE_DB; default ${DEFAULT_STORE_URL})
  --json       machine-readable output
  --log F      worker and serve: the structured log of transitions, steps, signals and approvals on
               standard output, as json (pino lines), pretty or none; default json (worker: none on a terminal)
  --as NAME    who asks (start, cancel, retry, pause, resume, signal, send, delete, purge): recorded in the
               task's log, or in the deletion's audit (observers' onTasksDeleted)

Only worker and migrate create a SQLite database; the other commands refuse a path where none exists.
`;

type Command = (ctx: CommandContext) => Promise<void>;
const COMMANDS: Record<string, Command> = {
  worker,
  start: commands.start,
  ls: commands.ls,
  show: commands.show,
  explain: commands.explain,
  cancel: commands.cancel,
  retry: commands.retry,
  fork: commands.fork,
  drift,
  bulk: bulkCommand,
  pause: commands.pause,
  resume: commands.resume,
  delete: commands.deleteTask,
  purge: commands.purge,
  signal: commands.signal,
  send: commands.send,
  migrate: commands.migrate,
  // Loaded on use: the other commands never load the server's dependencies (Hono, pino, prom-client, zod).
  serve: async (ctx) => (await import('./serve.ts')).serve(ctx),
  mcp: async (ctx) => (await import('./mcp.ts')).mcp(ctx),
  approvals: approvalCommands.approvals,
  alerts,
  approve: approvalCommands.approve,
  reject: approvalCommands.reject,
  schedules,
};

/** The options each command reads, besides --db, --json and --help: a flag of another command is refused, not ignored. */
const COMMAND_FLAGS: Record<string, readonly string[]> = {
  worker: ['concurrency', 'claim-batch', 'lease-ms', 'heartbeat-ms', 'poll-ms', 'grace-ms', 'keep-parked', 'workflows', 'worker-id', 'quiet', 'log'],
  start: ['input', 'inputs', 'key', 'key-field', 'wait', 'as', 'title', 'debounce', 'period', 'max-wait', 'singleton', 'join', 'priority', 'tag', 'workflow-version'],
  ls: ['status', 'workflow', 'parent', 'tag', 'since', 'until', 'failed-with', 'text', 'limit', 'cursor'],
  show: [],
  explain: [],
  cancel: ['reason', 'as'],
  retry: ['from-step', 'compensate', 'module', 'as'],
  fork: ['from-step', 'input', 'tag', 'title', 'module', 'as'],
  drift: ['status', 'workflow', 'tag', 'since', 'until', 'failed-with', 'text', 'limit', 'cursor'],
  bulk: ['status', 'workflow', 'parent', 'tag', 'since', 'until', 'failed-with', 'text', 'limit', 'reason', 'from-step', 'compensate', 'module', 'yes', 'as'],
  pause: ['as', 'subtree'],
  resume: ['as', 'subtree'],
  delete: ['as'],
  purge: ['older-than', 'status', 'workflow', 'limit', 'dry-run', 'as'],
  signal: ['data', 'key', 'require-waiting', 'as'],
  send: ['data', 'key', 'as'],
  migrate: [],
  serve: ['port', 'host', 'auth', 'with-worker', 'log'],
  mcp: ['as', 'role', 'module'],
  approvals: ['pending', 'status', 'approver', 'workflow'],
  alerts: ['kind', 'workflow', 'task', 'limit', 'cursor'],
  approve: ['as', 'comment', 'data', 'key'],
  reject: ['as', 'comment', 'data', 'key'],
  schedules: ['workflow', 'cron', 'timezone', 'input', 'overlap', 'catchup', 'paused'],
};
const GLOBAL_FLAGS = ['db', 'json', 'help'];

/** A flag given to a command that does not read it (a typo of another flag, or a flag of another command). */
function foreignFlags(name: string, values: Record<string, unknown>): string | null {
  const allowed = [...GLOBAL_FLAGS, ...(COMMAND_FLAGS[name] ?? [])];
  const foreign = Object.keys(values).filter((k) => values[k] !== undefined && !allowed.includes(k));
  if (!foreign.length) return null;
  const own = COMMAND_FLAGS[name] ?? [];
  return `stepwise ${name}: ${foreign.map((f) => `--${f}`).join(', ')} ${foreign.length > 1 ? 'are not options' : 'is not an option'} of ${name} (${own.length ? `its options: ${own.map((f) => `--${f}`).join(', ')}` : 'it takes none'}, and --db, --json).`;
}

/** Every option of every command (parseArgs refuses any other). */
const OPTIONS = {
  db: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  input: { type: 'string' },
  inputs: { type: 'string' },
  'key-field': { type: 'string' },
  key: { type: 'string' },
  wait: { type: 'boolean' },
  title: { type: 'string' },
  debounce: { type: 'string' },
  period: { type: 'string' },
  'max-wait': { type: 'string' },
  priority: { type: 'string' },
  tag: { type: 'string', multiple: true },
  'workflow-version': { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  'failed-with': { type: 'string' },
  text: { type: 'string' },
  singleton: { type: 'string' },
  join: { type: 'boolean' },
  status: { type: 'string' },
  workflow: { type: 'string' },
  workflows: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  parent: { type: 'string' },
  subtree: { type: 'boolean' },
  reason: { type: 'string' },
  data: { type: 'string' },
  concurrency: { type: 'string' },
  'claim-batch': { type: 'string' },
  'lease-ms': { type: 'string' },
  'heartbeat-ms': { type: 'string' },
  'poll-ms': { type: 'string' },
  'grace-ms': { type: 'string' },
  'keep-parked': { type: 'string' },
  'worker-id': { type: 'string' },
  quiet: { type: 'boolean' },
  as: { type: 'string' },
  role: { type: 'string' },
  'require-waiting': { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  auth: { type: 'string' },
  'with-worker': { type: 'boolean' },
  log: { type: 'string' },
  'from-step': { type: 'string' },
  compensate: { type: 'boolean' },
  module: { type: 'string' },
  pending: { type: 'boolean' },
  approver: { type: 'string' },
  kind: { type: 'string' },
  task: { type: 'string' },
  comment: { type: 'string' },
  'older-than': { type: 'string' },
  yes: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  cron: { type: 'string' },
  timezone: { type: 'string' },
  overlap: { type: 'string' },
  catchup: { type: 'string' },
  paused: { type: 'boolean' },
} as const;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: OPTIONS,
    });
  } catch (e) {
    process.stderr.write(`stepwise: ${(e as Error).message}\nRun \`stepwise help\` for usage.\n`);
    return 2;
  }
  const [name, ...args] = parsed.positionals;
  if (!name || name === 'help' || parsed.values.help) {
    process.stdout.write(HELP);
    return name || parsed.values.help ? 0 : 2;
  }
  if (name === 'version') {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    process.stdout.write(`${pkg.version}\n`);
    return 0;
  }
  const run = COMMANDS[name];
  if (!run) {
    process.stderr.write(`stepwise: unknown command "${name}". Commands: ${Object.keys(COMMANDS).join(', ')}, version, help.\n`);
    return 2;
  }
  const foreign = foreignFlags(name, parsed.values);
  if (foreign) {
    process.stderr.write(`${foreign}\n`);
    return 2;
  }
  try {
    await run({
      db: parsed.values.db || process.env.STEPWISE_DB || DEFAULT_STORE_URL,
      json: parsed.values.json === true,
      args,
      options: parsed.values,
      out: (line) => process.stdout.write(`${line}\n`),
      stdout: process.stdout,
    });
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    const code = isStepwiseError(e) ? e.code : undefined;
    const message = e instanceof Error ? e.message : String(e);
    if (parsed.values.json) process.stderr.write(`${JSON.stringify({ error: { code: code ?? 'ERROR', message } })}\n`);
    else process.stderr.write(`stepwise: ${code ? `[${code}] ` : ''}${message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
