/**
 * @module start-plan
 * Internal: not part of the public API (the package exports only its index modules).
 * What a start writes, decided before anything is written: the workflow and its version, the
 * input checked by the workflow's schema, encoded and within its size limit, the idempotency key
 * and delay checked, the creation planned by the lifecycle. And what a start answers once its
 * task is inserted: the task, or an IdempotencyConflictError when its key names a task of another
 * workflow or input. Shared by `engine.start()` and `engine.startMany()`.
 */
import type { Clock } from './clock.ts';
import { toMs, type Duration } from './duration.ts';
import { IdempotencyConflictError, InvalidArgumentError, InvalidInputError, NotSerializableError, WorkflowNotFoundError, coerceError } from './errors.ts';
import { newId } from './ids.ts';
import { jsonEqual } from './json-equal.ts';
import type { TaskStatus } from './lifecycle.ts';
import { checkSize, type Limits } from './limits.ts';
import { decodeJson, encodeJson } from './serialize.ts';
import type { NewTask, Store, TaskRow } from './store.ts';
import type { Actor } from './task-events.ts';
import { checkKey } from './text-rules.ts';
import { planCreation } from './transitions.ts';
import { isWorkflow, type Workflow } from './workflow.ts';
import { startUsage } from './ai/metering/start-usage.ts';
import { taskDeadline } from './failure/deadline.ts';
import type { Budget } from './ai/metering/usage.ts';
import { taskTitle } from './api/start-keys.ts';
import { checkPriority, concurrencyKeyOf } from './flow/options.ts';
import { startTags, type Tags } from './api/tags.ts';

/** One task of `engine.startMany()`. */
export interface StartManyItem {
  /** The workflow's name or definition. */
  workflow: string | Workflow<any, any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
  input?: unknown;
  /** Starting twice with the same key returns the first task instead of creating a second. */
  idempotencyKey?: string;
  /** Do not run before this much time has passed. */
  delay?: Duration;
  /** Who asks (recorded in the log). @defaultValue an anonymous user */
  by?: string | Actor;
  /** This task's spending limit over its model calls, instead of the workflow's `budget`. */
  budget?: Budget;
  /** When the task must be finished (a Date or ms since the epoch); see `StartOptions.deadline`. */
  deadline?: Date | number;
  /** A short text naming the task for people (1-200 characters); see `StartOptions.title`. */
  title?: string;
  /** 0..1000, higher first; see `StartOptions.priority`. */
  priority?: number;
  /** Tags to search the task by; see `StartOptions.tags`. */
  tags?: Tags;
  /** The workflow version the task is pinned to; see `StartOptions.version`. */
  version?: string;
}

export interface StartContext {
  store: Store;
  clock: Clock;
  limits: Required<Limits>;
  workflows: ReadonlyMap<string, Workflow>;
  actorOf: (by: string | Actor | undefined) => Actor;
}

export interface PlannedStart {
  task: NewTask;
  name: string;
}

export interface StartAnswer {
  id: string;
  workflow: string;
  status: TaskStatus;
  created: boolean;
}

/** Checks a start and builds the task it inserts; throws the error the caller should see. */
export async function planStart(
  c: StartContext,
  workflow: string | Workflow<unknown, unknown, unknown>,
  input: unknown,
  options: { idempotencyKey?: string; delay?: Duration; by?: string | Actor; budget?: Budget; deadline?: Date | number; title?: string; priority?: number; tags?: Tags; version?: string },
): Promise<PlannedStart> {
  const name = typeof workflow === 'string' ? workflow : workflow?.name;
  if (typeof name !== 'string') throw new InvalidArgumentError('engine.start() needs a workflow name or definition.');
  // A definition given here is used as it is, registered with this engine or not.
  const def = typeof workflow !== 'string' && isWorkflow(workflow) ? workflow : c.workflows.get(name);
  let version: string;
  let value: unknown = input;
  if (def) {
    version = def.version;
    if (def.options.input) {
      try {
        value = def.options.input.parse(input);
      } catch (e) {
        throw new InvalidInputError(name, coerceError(e).message, { cause: e });
      }
    }
  } else {
    const known = await c.store.listWorkflows();
    const versions = known.filter((w) => w.name === name).sort((a, b) => b.lastSeenAt - a.lastSeenAt);
    if (!versions.length) {
      throw new WorkflowNotFoundError(name, [...new Set([...c.workflows.keys(), ...known.map((w) => w.name)])].sort());
    }
    version = (versions[0] as { version: string }).version;
  }
  if (options.version !== undefined) version = await pinnedVersion(c, name, def, options.version);
  let encoded: string | null;
  try {
    encoded = encodeJson(value, 'The input');
  } catch (e) {
    throw new InvalidInputError(name, (e as NotSerializableError).message, { cause: e });
  }
  checkSize(encoded, c.limits.inputBytes, () => `The input of workflow "${name}"`, 'inputBytes');
  const key = options.idempotencyKey;
  if (key !== undefined) checkKey(key, 'The idempotencyKey');
  const actor = c.actorOf(options.by);
  const now = c.clock.now();
  const delayMs = options.delay === undefined ? 0 : toMs(options.delay, 'delay');
  const usage = startUsage(options.budget);
  const deadlineAt = taskDeadline(now, options.deadline, def?.options.timeout);
  const title = taskTitle(options.title, def?.options.title, value, name);
  const priority = options.priority !== undefined ? checkPriority('engine.start()', options.priority) : (def?.options.priority ?? 0);
  const tags = startTags(options.tags, 'engine.start()');
  const keyed = def ? concurrencyKeyOf(name, def.options.concurrency, value) : undefined;
  const id = newId(now);
  return {
    name,
    task: {
      id,
      workflow: name,
      workflowVersion: version,
      input: encoded,
      idempotencyKey: key ?? null,
      runAt: now + delayMs,
      createdAt: now,
      usage,
      deadlineAt,
      title,
      priority,
      ...(tags ? { tags } : {}),
      ...keyed,
      notify: { reason: 'task', taskId: id, workflow: name },
      ...planCreation(actor),
    },
  };
}

/**
 * The version a start pins its task to: one this engine's definition runs (its `version` or a
 * `compatibleVersions` entry) or one a worker has registered; any other is refused, naming them.
 */
async function pinnedVersion(c: StartContext, name: string, def: Workflow | undefined, asked: unknown): Promise<string> {
  if ((typeof asked !== 'string' && typeof asked !== 'number') || String(asked) === '') {
    throw new InvalidArgumentError(`engine.start(): version must be a workflow version (a string), got ${JSON.stringify(asked)}.`);
  }
  const version = String(asked);
  const known = new Set([
    ...(def ? [def.version, ...(def.options.compatibleVersions ?? []).map(String)] : []),
    ...(await c.store.listWorkflows()).filter((w) => w.name === name).map((w) => w.version),
  ]);
  if (!known.has(version)) {
    throw new InvalidArgumentError(`engine.start(): workflow "${name}" has no version "${version}" that a worker runs or has run (known: ${[...known].join(', ') || 'none'}).`);
  }
  return version;
}

/** The answer to a planned start once inserted; a key that names another workflow's task or another input is a conflict. */
/** What the store answered to one planned start (the start batcher's `Inserted`, declared here so the two modules do not import each other). */
export interface InsertedTask {
  task: TaskRow;
  created: boolean;
}

export function startResult(planned: PlannedStart, { task, created }: InsertedTask): StartAnswer {
  const { name } = planned;
  if (!created) {
    const key = planned.task.idempotencyKey as string;
    if (task.workflow !== name) throw new IdempotencyConflictError(key, task.id, `which runs workflow "${task.workflow}", not "${name}"`);
    if (!jsonEqual(decodeJson(task.input), decodeJson(planned.task.input))) throw new IdempotencyConflictError(key, task.id, 'which was started with a different input');
  }
  return { id: task.id, workflow: name, status: task.status, created };
}
