/**
 * @module run/identity
 * Internal: not part of the public API (the package exports only its index modules).
 * The identity of the code's calls. Each `ctx.step` / `ctx.sleep` / `ctx.waitForEvent` call takes
 * the next position (`seq`) in call order; its id is its name plus occurrence (`fetch`, `fetch#2`).
 * A position whose recorded name (or kind) differs is a non-determinism error: the code changed
 * incompatibly while the task was in flight. Calls of the cleanup scope (cancel handlers and
 * compensations) are identified apart from these positions, by name and occurrence within the
 * cleanup: see `cleanup-scope.ts`.
 */
import { InvalidArgumentError, NestedStepError, NonDeterminismError } from '../errors.ts';
import { enclosingStep } from './step-scope.ts';
import { textProblem } from '../text-rules.ts';
import type { StepKind, StepRow } from '../store.ts';
import { coreOf, type RunCore } from './core.ts';
import type { Run } from './run.ts';
import { COMPENSATE, ON_CANCEL, calledFromCleanup, inScope, refusalOf } from './cleanup-scope.ts';

/**
 * Names of steps, sleeps and events: not empty, no `#` (it marks repeats), no `|` (it separates
 * awaited events), and no whitespace at either end (`"fetch "` would be a different step from `"fetch"`).
 */
export const STEP_NAME = /^[^#|\s](?:[^#|]{0,198}[^#|\s])?$/;

export interface Position {
  /** The name the code gave, and its occurrence among the calls of that name (1, 2, …). */
  name: string;
  occurrence: number;
  seq: number;
  stepId: string;
  /** The journal's row at this position, if any. */
  recorded: StepRow | undefined;
}

/** Throws (failing the run) if `name` is not a valid name of a call. */
function checkName(run: RunCore, name: unknown, kind: StepKind): asserts name is string {
  if (typeof name !== 'string' || !STEP_NAME.test(name)) {
    throw run.fail(
      new InvalidArgumentError(
        `${kind} name ${JSON.stringify(name)} is not valid: use 1-200 characters without "#" (it marks repeats: fetch, fetch#2) or "|", and no whitespace at the start or end.`,
      ),
    );
  }
  // A name the journal cannot store exactly would not match itself on replay.
  const problem = textProblem(name);
  if (problem) throw run.fail(new InvalidArgumentError(`${kind} name ${JSON.stringify(name)} ${problem}: it cannot be stored exactly. Build names from whole characters.`));
}

/**
 * Takes the next journal position for a call; checks it against the journal. In the cleanup scope,
 * the call's identity there instead (`occurrence`: a compensation's, that of the step it undoes).
 */
export function position(run: RunCore, name: string, kind: StepKind, given?: number): Position {
  // The code's calls once it has stopped for good (its cleanup about to begin, or begun) do not
  // start (see `cleanup-scope.ts`), nor any after the cleanup ended.
  const refused = refusalOf(run.cleanup);
  if (refused) {
    if (!inScope(run.cleanup) || !calledFromCleanup(run)) throw refused;
    checkName(run, name, kind);
    return cleanupPosition(run, given === undefined ? `${ON_CANCEL}${name}` : name, kind, given);
  }
  const seen = typeof name === 'string' ? run.occurrences.get(name) : undefined;
  if (seen === undefined) checkCodeName(run, name, kind);
  const outer = enclosingStep(run);
  if (outer !== null) throw run.fail(nested(run, outer, kind, name));
  run.activity++;
  const seq = run.seq++;
  const occurrence = (seen ?? 0) + 1;
  run.occurrences.set(name, occurrence);
  const stepId = occurrence === 1 ? name : `${name}#${occurrence}`;
  const recorded = run.journal.get(seq);
  run.calledAfter.set(seq, run.replay.handed);
  if (recorded && (recorded.name !== stepId || recorded.kind !== kind)) {
    throw run.fail(
      new NonDeterminismError(
        run.taskId,
        seq,
        `${who(run)}: at position ${seq} the code now calls ${kind} "${stepId}", but the journal recorded ${recorded.kind} "${recorded.name}". ` +
          'The workflow code changed incompatibly while the task was in flight; deploy such changes under a new workflow version.',
      ),
    );
  }
  return { name, occurrence, seq, stepId, recorded };
}

/**
 * Names that passed {@link checkCodeName} in this process. A name's validity depends on nothing
 * but the name, and the runs of a workflow call the same few names: each is checked once, not at
 * every call of every run. Bounded, so that generated names cannot grow it without end.
 */
const validNames = new Set<string>();
const VALID_NAMES_MAX = 4096;

/** Throws (failing the run) if `name` is not valid for a call of the workflow code. */
function checkCodeName(run: RunCore, name: string, kind: StepKind): void {
  if (validNames.has(name)) return;
  checkName(run, name, kind);
  // The cleanup's calls are named with these prefixes: a code call so named would share their ids and keys.
  const reserved = [ON_CANCEL, COMPENSATE].find((prefix) => name.startsWith(prefix));
  if (reserved) {
    throw run.fail(
      new InvalidArgumentError(
        `${kind} name ${JSON.stringify(name)} is not valid: the prefix "${reserved}" is reserved for the calls of the cleanup (onCancel handlers, compensations). Choose another name.`,
      ),
    );
  }
  if (validNames.size < VALID_NAMES_MAX) validNames.add(name);
}

/** The error of a durable call made inside the function of step `outer`. */
function nested(run: RunCore, outer: string, kind: StepKind, name: string): NestedStepError {
  const call = `${kind} "${name}"`;
  return new NestedStepError(
    run.taskId,
    outer,
    name,
    `${who(run)}: ${call} was called inside the function of step "${outer}" (directly, through a helper that takes ctx such as a model call, or in a ctx.forEach item). ` +
      `A step's function is not called again on replay, only its recorded result is returned, so durable calls inside it cannot be replayed. ` +
      `Call ${call} from the workflow function, before or after step "${outer}" (split the work into several steps), or do that work inside the step without ctx.`,
  );
}

/**
 * A call of the cleanup scope: identified by its scoped name (`onCancel:…`, `compensate:…`) and
 * its occurrence within the cleanup, at the position its id was first recorded at (or the next
 * free one of the cleanup's).
 */
function cleanupPosition(run: RunCore, name: string, kind: StepKind, given: number | undefined): Position {
  run.activity++;
  let occurrence = given;
  if (occurrence === undefined) {
    occurrence = (run.cleanupOccurrences.get(name) ?? 0) + 1;
    run.cleanupOccurrences.set(name, occurrence);
  }
  const stepId = occurrence === 1 ? name : `${name}#${occurrence}`;
  const recorded = run.cleanupJournal.get(stepId);
  if (recorded && recorded.kind !== kind) {
    throw run.fail(
      new NonDeterminismError(
        run.taskId,
        recorded.seq,
        `${who(run)}: in its cleanup the code now calls ${kind} "${stepId}", but the journal recorded ${recorded.kind} "${recorded.name}" under that name. ` +
          'The workflow code changed incompatibly while the task was in flight; deploy such changes under a new workflow version.',
      ),
    );
  }
  const seq = recorded ? recorded.seq : run.cleanupSeq++;
  run.calledAfter.set(seq, run.replay.handed);
  return { name, occurrence, seq, stepId, recorded };
}

/** A journal row of this run at `seq`. */
export function journalRow(view: Run, seq: number, stepId: string, kind: StepKind, fields: Partial<StepRow>): StepRow {
  const run = coreOf(view);
  return {
    taskId: run.taskId,
    seq,
    name: stepId,
    kind,
    status: 'completed',
    output: null,
    error: null,
    attempts: 0,
    startedAt: null,
    finishedAt: null,
    wakeAt: null,
    epoch: run.epoch,
    done: null,
    calledAfter: run.calledAfter.get(seq) ?? null,
    businessKey: run.businessKeyOf(seq),
    ...fields,
  };
}

/** The task and its workflow's versions, for messages. */
export function who(run: RunCore): string {
  const started = run.task.workflowVersion;
  const now = run.workflow.version;
  return `Task ${run.taskId} (workflow "${run.workflow.name}" version ${now}${started !== now ? `, started under version ${started}` : ''})`;
}

/**
 * The code did not make the call the journal says came next (`what`): its control flow depends on
 * something other than its steps' results. Fails the run.
 */
export function diverged(run: RunCore, next: StepRow, what: string): void {
  run.fail(new NonDeterminismError(run.taskId, next.seq, `${who(run)}: ${what} The workflow's control flow depends on something other than its steps' results.`));
}
