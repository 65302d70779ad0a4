/**
 * @module testing/check-resume
 * `checkResume(workflow, options)`: proves, in an ordinary test, that a workflow survives a crash
 * at every step boundary (R38, B11). It runs the workflow once without a crash (the baseline),
 * then once per crash point, each on a fresh database: for each of the task's durable writes, a
 * worker dies right before the write becomes durable and, as a second point, right after it; a new
 * worker process takes the task over and runs it to the end. The resumed task must end as the
 * baseline did (status, output or error, the calls in its journal, and what the user's `effects()`
 * says the outside world holds), no step whose result was durable may run again, a step that runs
 * again must get the same idempotency key, and the task must not fail with NON_DETERMINISM. The
 * first crash point where it does not is a {@link ResumeCheckError}.
 *
 * How a run is simulated and driven is in `trial.ts` (processes), `replay/process-store.ts` (the crash) and
 * `world.ts` (signals, approvals, the clock); the judgement of one run is below.
 */
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { toMs, type Duration } from '../duration.ts';
import { InvalidArgumentError } from '../errors.ts';
import type { Limits } from '../limits.ts';
import type { RateLimits } from '../api/rate-limits.ts';
import type { Observer } from '../observers.ts';
import { openStore } from '../store-url.ts';
import { isWorkflow, type Workflow } from '../workflow.ts';
import { firstDifference, normalized, notJson, sameJson, show } from '../replay/compare.ts';
import { ManualClock } from '../manual-clock.ts';
import { ResumeCheckError, describePoint, type CrashPoint, type CrashPointResult, type ResumeFailure, type ResumeReport } from './resume-report.ts';
import { runTrial, type JournalCall, type TaskOutcome, type TrialResult, type TrialSettings } from './trial.ts';
import type { ApprovalAnswer, TaskWait } from './world.ts';

/** What `setup` and `effects` are told about a run. */
export interface RunSetup {
  /** The crash point of this run, or null for the run without a crash. */
  point: CrashPoint | null;
  /** This run's clock (the engine's): the check moves it to every wake-up. */
  clock: ManualClock;
  /**
   * This run's database (a store URL, its schema in place): where a transactional step
   * (`ctx.transaction`) writes, so that `setup` can create your tables and `effects` read them.
   */
  database: string;
}

export interface CheckResumeOptions<I = unknown> {
  /** The task's input. */
  input?: I;
  /**
   * Called before every run (the baseline and each crash point), before anything starts: reset your
   * fakes here, so that each run starts from the same world.
   */
  setup?: (run: RunSetup) => unknown;
  /**
   * What the outside world holds after a run (your fakes: e-mails sent, charges made; rows of your
   * tables), as JSON data: an array or a plain object (a Set, a Map or a class instance is refused
   * with INVALID_ARGUMENT). Called once each run has finished, and once the step functions still
   * running in the dead worker have returned; every crash point's must equal the baseline's.
   */
  effects?: (run: RunSetup) => unknown;
  /**
   * Signals sent when the parked task waits for them: by name (one each), or a list (sent in order,
   * a name may repeat). Each is sent once per run, when the task waits for its name.
   */
  signals?: Readonly<Record<string, unknown>> | ReadonlyArray<{ name: string; payload?: unknown }>;
  /** Decisions for the approvals the task waits for, by approval name (`ctx.approval(name)`). */
  approvals?: Readonly<Record<string, ApprovalAnswer>>;
  /**
   * Called when the parked task waits for events or approvals that `signals` and `approvals` do not
   * answer (once per park), with the means to answer: `wait.signal(name, payload)`,
   * `wait.decide(approvalId, decision)`. Must answer the same way in every run.
   */
  onWait?: (wait: TaskWait) => unknown;
  /**
   * The engine's clock. The check moves it forward to every wake-up of the parked task (a sleep, a
   * retry backoff, an event's timeout). A function gives each run a fresh clock (so that times in
   * outputs agree between runs); one ManualClock is shared by every run and only moves forward.
   * @defaultValue a new ManualClock per run
   */
  clock?: ManualClock | (() => ManualClock);
  /** Observers given to the workers' engines (a dead worker's go silent with it). */
  observers?: readonly Observer[];
  /** Size limits, as for `new Engine({ limits })`. */
  limits?: Limits;
  /** Rate limits the workflow's steps draw on, as for `new Engine({ rateLimits })`. */
  rateLimits?: RateLimits;
  /**
   * Where each run's fresh, empty database is: a function returning a new store URL per call (a
   * new PostgreSQL schema: `postgres://…?schema=…`). Removing them afterwards is yours.
   * @defaultValue a SQLite file per run in a temporary directory, removed at the end
   */
  database?: () => string | Promise<string>;
  /** Real time one run may take before it counts as not finished. @defaultValue '10s' */
  timeout?: Duration;
}

const OPTIONS = [
  'input',
  'setup',
  'effects',
  'signals',
  'approvals',
  'onWait',
  'clock',
  'observers',
  'limits',
  'rateLimits',
  'database',
  'timeout',
] as const satisfies readonly (keyof CheckResumeOptions)[];

const DEFAULT_TIMEOUT_MS = 10_000;

/**
 * Runs `workflow` once without a crash, then once per crash point (right before and right after
 * each of its durable writes), each time on a fresh database, letting a new worker take the task
 * over after the crash. Throws {@link ResumeCheckError} at the first crash point after which the
 * task does not end as it did without a crash; returns the report of every point otherwise.
 * @example
 * import { checkResume } from 'stepwise-engine/testing';
 * const report = await checkResume(publish, { input: { topic: 'x' }, signals: { review: { approved: true } } });
 * // report.points: [{ write: 1, when: 'before', what: 'the result of step "generate"', interrupted: ['generate'], ranAgain: ['generate'] }, …]
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function checkResume<In>(workflow: Workflow<any, any, In>, options: CheckResumeOptions<In> = {}): Promise<ResumeReport> {
  const checked = checkOptions(workflow, options);
  const name = (workflow as Workflow).name;
  let dir: string | null = null;
  let runs = 0;
  let template: string | null = null;
  const migrated = async (url: string): Promise<string> => {
    const store = await openStore(url);
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    return url;
  };
  const database = options.database
    ? async () => migrated(checkUrl(await options.database!()))
    : async () => {
        // A migrated empty database, copied for each run (migrating a fresh file costs more than a run).
        dir ??= mkdtempSync(join(tmpdir(), 'stepwise-check-'));
        if (!template) {
          const path = join(dir, 'empty.db');
          await migrated(`sqlite:${path}`);
          template = path;
        }
        const path = join(dir, `run-${++runs}.db`);
        copyFileSync(template, path);
        return `sqlite:${path}`;
      };
  const run = async (point: CrashPoint | null): Promise<{ trial: TrialResult; effects: unknown }> => {
    const info: RunSetup = { point, clock: checked.clock(), database: await database() };
    await options.setup?.(info);
    const settings: TrialSettings = { ...checked.settings, clock: info.clock, database: info.database };
    const trial = await runTrial(settings, point && { write: point.write, when: point.when });
    if (!options.effects || !trial.end.finished) return { trial, effects: undefined };
    const raw = await options.effects(info);
    const bad = notJson(raw);
    if (bad) {
      throw new InvalidArgumentError(
        `checkResume("${name}"): effects() must return JSON data (an array or a plain object of strings, numbers, booleans, null, arrays and plain objects), but it returned ${bad}. ` +
          'A Set, a Map, a Date, a function or a class instance does not compare as its contents: return an array ([...set]) or a plain object (Object.fromEntries(map)).',
      );
    }
    return { trial, effects: normalized(raw, trial.taskId) };
  };
  try {
    const first = await run(null);
    const base = first.trial;
    const fail = (point: CrashPoint | null, reason: ResumeFailure, text: string, report: ResumeReport | null, reached = true): ResumeCheckError => {
      const where = !point
        ? 'the run without a crash: '
        : reached
          ? `${describePoint(point)}; a new worker took the task over, and `
          : `the run meant to crash ${point.when} write ${point.write} of ${point.of} (${point.what}) made fewer writes and finished without a crash (the workflow does not run the same way twice), and `;
      return new ResumeCheckError(`checkResume("${name}"): ${where}${text}`, { workflow: name, point, reason, report });
    };
    if (!base.end.finished) throw fail(null, 'not-finished', `the task did not finish: ${base.end.why}.`, null);
    const outcome = normalizedOutcome(base.end.outcome, base.taskId);
    if (isNonDeterminism(outcome)) throw fail(null, 'non-determinism', nonDeterminism(outcome), null);
    const report: ResumeReport = {
      workflow: name,
      baseline: { outcome, attempts: base.first, writes: base.writes, calls: base.end.calls, ...(options.effects ? { effects: first.effects } : {}) },
      points: [],
    };
    const of = base.writes.length;
    for (const write of base.writes) {
      for (const when of ['before', 'after'] as const) {
        const point: CrashPoint = { write: write.index, of, when, what: write.what };
        const { trial, effects } = await run(point);
        const result = judge(point, trial, report, effects);
        report.points.push(result.point);
        if (result.failure) throw fail({ ...point, what: result.point.what }, result.failure.reason, result.failure.text, report, result.point.reached);
      }
    }
    return report;
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

/** One crash point's run against the baseline: its result, and the first failure if any. */
function judge(point: CrashPoint, t: TrialResult, report: ResumeReport, effects: unknown): { point: CrashPointResult; failure: { reason: ResumeFailure; text: string } | null } {
  const before = new Set(t.first.map((a) => a.step));
  const result: CrashPointResult = {
    ...point,
    // The write it died at, as this run described it (the same as the baseline's when the workflow runs the same way).
    what: t.death?.what ?? point.what,
    reached: t.death !== null,
    interrupted: [...before].filter((s) => !t.durable.includes(s)),
    ranAgain: [...new Set(t.second.map((a) => a.step))].filter((s) => before.has(s)),
  };
  const failed = (reason: ResumeFailure, text: string) => ({ point: result, failure: { reason, text } });
  if (!t.end.finished) return failed('not-finished', `the task did not finish: ${t.end.why}.`);
  const outcome = normalizedOutcome(t.end.outcome, t.taskId);
  if (isNonDeterminism(outcome)) return failed('non-determinism', nonDeterminism(outcome));
  for (const a of t.second) {
    if (t.durable.includes(a.step)) {
      return failed(
        'durable-step-ran-again',
        `step "${a.step}" ran again (attempt ${a.attempt}), although its result was durable before the crash.\n` +
          'A recorded step is handed back by replay, never run again: this points to a bug in Stepwise or in its store; please report it with this message.',
      );
    }
    const firstKey = t.first.find((f) => f.step === a.step)?.idempotencyKey;
    if (firstKey !== undefined && firstKey !== a.idempotencyKey) {
      return failed(
        'key-changed',
        `step "${a.step}" ran again with idempotency key ${show(normalized(a.idempotencyKey, t.taskId))}, but its attempt before the crash had ${show(normalized(firstKey, t.taskId))}.\n` +
          "An API that deduplicates on the key would do the effect twice. A business key (the step's `key` option) must come from the input and earlier steps' results only, not from Date.now(), Math.random() or a counter.",
      );
    }
  }
  const base = report.baseline;
  const calls = callDifference(base.calls, t.end.calls);
  if (calls) {
    return failed(
      'calls-differ',
      `the task made other calls than the run without a crash: ${calls}.\n` +
        "The workflow's control flow depends on something other than its input and its steps' results (Math.random(), Date.now(), a counter, I/O outside ctx.step): move it into a step.",
    );
  }
  if (!sameJson(outcome, base.outcome)) {
    return failed(
      'outcome-differs',
      `${outcomeDifference(base.outcome, outcome)}.\n` +
        'Code outside ctx.step ran again when the task resumed (a counter or a side effect in the workflow body), or a step that ran again returned something else (make your fakes deterministic).',
    );
  }
  if ('effects' in base && !sameJson(effects, base.effects)) {
    const d = firstDifference(base.effects, effects);
    const again = result.ranAgain.length ? ` Steps that ran again: ${result.ranAgain.map((s) => `"${s}"`).join(', ')}.` : '';
    return failed(
      'effects-differ',
      `what effects() returned differs from the run without a crash${d ? ` at ${d.path || 'the top'}: ${show(d.a)} without a crash, ${show(d.b)} after it` : ''}.\n` +
        `A side effect happened again when the task resumed: one outside ctx.step (it runs again on every replay), or a step that ran again without handing its idempotencyKey to an API that deduplicates.${again}`,
    );
  }
  return { point: result, failure: null };
}

function normalizedOutcome(o: TaskOutcome, taskId: string): TaskOutcome {
  return normalized(o, taskId) as TaskOutcome;
}

function isNonDeterminism(o: TaskOutcome): o is Extract<TaskOutcome, { status: 'failed' }> {
  return o.status === 'failed' && o.error.code === 'NON_DETERMINISM';
}

function nonDeterminism(o: Extract<TaskOutcome, { status: 'failed' }>): string {
  return (
    `the task failed with NON_DETERMINISM: ${o.error.message}\n` +
    "The code did not change here: it made other calls when it ran again. Control flow between steps must depend only on the input and the steps' results: move Math.random(), Date.now(), counters and I/O into ctx.step."
  );
}

function callName(c: JournalCall | undefined): string {
  return c ? `${c.kind} "${c.step}" (${c.status})` : 'no call';
}

/**
 * The first call where two journals differ, for people; null if they agree. Calls are matched by
 * identity, not by position: by name (without its occurrence, `fetch#2` is a `fetch`), each name's
 * calls in their order, with their kind and final status. Calls in parallel branches (sub-agents
 * of a tool loop, steps under Promise.all) that ran again after the crash take their positions
 * (and a shared name's occurrences) in the order they were made, which timing decides; a call
 * made, left out, or ended otherwise is a difference.
 */
function callDifference(a: readonly JournalCall[], b: readonly JournalCall[]): string | null {
  const byName = (calls: readonly JournalCall[]) => {
    const m = new Map<string, JournalCall[]>();
    for (const c of [...calls].sort((x, y) => x.seq - y.seq)) {
      const name = c.step.replace(/#\d+$/, '');
      m.set(name, [...(m.get(name) ?? []), c]);
    }
    return m;
  };
  const ma = byName(a);
  const mb = byName(b);
  const first = (calls: readonly JournalCall[]) => calls.reduce((min, c) => Math.min(min, c.seq), Infinity);
  const names = [...new Set([...ma.keys(), ...mb.keys()])].sort((x, y) => first(ma.get(x) ?? mb.get(x)!) - first(ma.get(y) ?? mb.get(y)!));
  for (const name of names) {
    const xs = ma.get(name) ?? [];
    const ys = mb.get(name) ?? [];
    for (let i = 0; i < Math.max(xs.length, ys.length); i++) {
      const x = xs[i];
      const y = ys[i];
      if (x && y && x.kind === y.kind && x.status === y.status) continue;
      const nth = xs.length > 1 || ys.length > 1 ? `call ${i + 1} of "${name}"` : `the call "${name}"`;
      return `${nth}: ${callName(x)} without a crash, ${callName(y)} after it`;
    }
  }
  return null;
}

function outcomeDifference(a: TaskOutcome, b: TaskOutcome): string {
  const what = (o: TaskOutcome): string =>
    o.status === 'succeeded' ? `succeeded with ${show(o.output)}` : o.status === 'failed' ? `failed with ${o.error.code ?? o.error.name}: ${show(o.error.message, 200)}` : 'was cancelled';
  if (a.status === 'succeeded' && b.status === 'succeeded') {
    const d = firstDifference(a.output, b.output);
    return `the task's output differs from the run without a crash${d ? ` at ${d.path || 'the top'}: ${show(d.a)} without a crash, ${show(d.b)} after it` : ''} (without a crash: ${show(a.output)}; after it: ${show(b.output)})`;
  }
  return `the task ${what(b)}, but without a crash it ${what(a)}`;
}

function checkUrl(url: unknown): string {
  if (typeof url !== 'string' || !url) throw new InvalidArgumentError(`checkResume: database() must return a store URL (sqlite:<path> or postgres://…?schema=…), got ${show(url)}.`);
  return url;
}

interface Checked {
  settings: Omit<TrialSettings, 'clock' | 'database'>;
  clock: () => ManualClock;
}

function isClock(c: unknown): c is ManualClock {
  return typeof c === 'object' && c !== null && ['now', 'sleep', 'set', 'advance'].every((m) => typeof (c as Record<string, unknown>)[m] === 'function');
}

function checkOptions<I>(workflow: unknown, options: CheckResumeOptions<I>): Checked {
  if (!isWorkflow(workflow)) throw new InvalidArgumentError('checkResume(workflow, options): the first argument must be a workflow made by workflow(name, fn).');
  const where = `checkResume("${workflow.name}")`;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new InvalidArgumentError(`${where}: options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !(OPTIONS as readonly string[]).includes(k));
  if (unknown.length) throw new InvalidArgumentError(`${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${OPTIONS.join(', ')}).`);
  for (const f of ['setup', 'effects', 'onWait', 'database'] as const) {
    if (options[f] !== undefined && typeof options[f] !== 'function') throw new InvalidArgumentError(`${where}: ${f} must be a function.`);
  }
  const signals = checkSignals(where, options.signals);
  const approvals = options.approvals ?? {};
  if (typeof approvals !== 'object' || approvals === null || Array.isArray(approvals)) throw new InvalidArgumentError(`${where}: approvals must be an object of decisions by approval name.`);
  for (const [n, a] of Object.entries(approvals)) {
    if (typeof a !== 'object' || a === null || typeof (a as ApprovalAnswer).approve !== 'boolean')
      throw new InvalidArgumentError(`${where}: approvals[${JSON.stringify(n)}] must be { approve: true | false, by?, comment?, data? }.`);
  }
  const observers = options.observers ?? [];
  if (!Array.isArray(observers)) throw new InvalidArgumentError(`${where}: observers must be an array.`);
  const timeoutMs = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : toMs(options.timeout, `${where}: timeout`);
  if (!(timeoutMs > 0)) throw new InvalidArgumentError(`${where}: timeout must be longer than 0.`);
  const c = options.clock;
  if (c !== undefined && typeof c !== 'function' && !isClock(c))
    throw new InvalidArgumentError(`${where}: clock must be a ManualClock (from stepwise-engine/testing), or a function returning a new one.`);
  const clock = (): ManualClock => {
    if (c === undefined) return new ManualClock();
    const made = typeof c === 'function' ? c() : c;
    if (!isClock(made)) throw new InvalidArgumentError(`${where}: clock() must return a ManualClock.`);
    return made;
  };
  return {
    settings: { workflow, input: options.input, answers: { signals, approvals, onWait: options.onWait }, observers, limits: options.limits, rateLimits: options.rateLimits, timeoutMs },
    clock,
  };
}

function checkSignals(where: string, signals: CheckResumeOptions['signals']): Array<{ name: string; payload?: unknown }> {
  if (signals === undefined) return [];
  if (Array.isArray(signals)) {
    return signals.map((s: unknown, i) => {
      if (typeof s !== 'object' || s === null || typeof (s as { name?: unknown }).name !== 'string' || !(s as { name: string }).name) {
        throw new InvalidArgumentError(`${where}: signals[${i}] must be { name: string, payload? }.`);
      }
      return s as { name: string; payload?: unknown };
    });
  }
  if (typeof signals !== 'object' || signals === null) throw new InvalidArgumentError(`${where}: signals must be an object of payloads by signal name, or a list of { name, payload }.`);
  return Object.entries(signals).map(([name, payload]) => ({ name, payload }));
}
