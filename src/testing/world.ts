/**
 * @module testing/world
 * "The world" of a `checkResume` run: what happens to a task from outside while workers run it.
 * It reads the task through a client engine of its own (another process, for the workers) and,
 * whenever the task is parked: sends the next configured signal it waits for, decides the
 * approvals it waits for, asks `onWait` about what neither answers, and otherwise moves the clock
 * to the task's next due time (a sleep, a retry backoff, an event's timeout). Its moves depend only
 * on the task's state, so every run of the check is driven the same way.
 */
import { RESERVED_SIGNAL_PREFIX } from '../approvals/policy.ts';
import { MACHINE_SIGNAL_PREFIX } from '../machine/machine.ts';
import type { DecideOptions } from '../approvals/types.ts';
import type { Engine } from '../engine.ts';
import { isFinished } from '../lifecycle.ts';
import type { Store, TaskRow } from '../store.ts';
import type { ManualClock } from '../manual-clock.ts';

/** A decision `checkResume` makes for an approval the task waits for. */
export interface ApprovalAnswer {
  approve: boolean;
  /** Who decides. @defaultValue each listed approver in turn, until the approval's quorum is met */
  by?: string;
  comment?: string;
  /** Handed back to the workflow (an edited draft). JSON. */
  data?: unknown;
}

/** What a parked task waits for, handed to `onWait`, with the means to answer it. */
export interface TaskWait {
  taskId: string;
  /** The events it waits for: signal names, or a state machine's events (sent with `engine.send`). */
  events: string[];
  /** The approvals it waits for. */
  approvals: Array<{ id: string; name: string; approvers: string[] }>;
  /** When it wakes up by itself (a timeout), or null. */
  until: number | null;
  /** Sends a signal to the task (an event, to a state machine's task). */
  signal(name: string, payload?: unknown): Promise<void>;
  /** Decides an approval (see `engine.decide`). */
  decide(approvalId: string, decision: DecideOptions): Promise<void>;
}

export interface WorldAnswers {
  signals: ReadonlyArray<{ name: string; payload?: unknown }>;
  approvals: Readonly<Record<string, ApprovalAnswer>>;
  onWait: ((wait: TaskWait) => unknown) | undefined;
}

type Driven = 'finished' | 'died' | { why: string };

const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface ApprovalWait {
  id: string;
  name: string;
  approvers: string[];
}

/** The events a parked task waits for: its signals' names, a state machine's events without their prefix; not approvals'. */
function eventsOf(row: TaskRow): string[] {
  return (row.waitEvents ?? []).filter((n) => !n.startsWith(RESERVED_SIGNAL_PREFIX)).map((n) => (n.startsWith(MACHINE_SIGNAL_PREFIX) ? n.slice(MACHINE_SIGNAL_PREFIX.length) : n));
}

/** The approvals a task's `wait` names (a lone approval, or among several waits). */
function approvalsOf(wait: Record<string, unknown> | null): ApprovalWait[] {
  if (!wait) return [];
  const all = wait.kind === 'several' && Array.isArray(wait.waits) ? (wait.waits as Record<string, unknown>[]) : [wait];
  return all
    .filter((w) => w.kind === 'approval' && typeof w.approval === 'string')
    .map((w) => ({ id: w.approval as string, name: String(w.name), approvers: Array.isArray(w.approvers) ? (w.approvers as string[]) : [] }));
}

export class World {
  readonly #client: Engine;
  readonly #store: Store;
  readonly #taskId: string;
  readonly #clock: ManualClock;
  readonly #answers: WorldAnswers;
  /** Indexes of the configured signals sent so far. */
  readonly #sent = new Set<number>();
  readonly #decided = new Set<string>();
  /** Task versions `onWait` was asked about (once per park). */
  readonly #asked = new Set<number>();
  /** Answers given through `onWait`'s functions. */
  #acts = 0;

  constructor(client: Engine, store: Store, taskId: string, clock: ManualClock, answers: WorldAnswers) {
    this.#client = client;
    this.#store = store;
    this.#taskId = taskId;
    this.#clock = clock;
    this.#answers = answers;
  }

  /**
   * Drives the task until it finishes, the worker `process` dies (checked first, so that what a
   * dead process leaves behind is not driven further), it can go no further, or `deadline` passes.
   */
  async drive(deadline: number, process: { readonly dead: boolean; readonly died: Promise<void> } | null): Promise<Driven> {
    const died = process?.died;
    for (;;) {
      if (process?.dead) return 'died';
      const row = await this.#store.getTask(this.#taskId);
      if (!row) return { why: 'the task is gone' };
      if (process?.dead) return 'died';
      if (isFinished(row.status)) return 'finished';
      if (row.status === 'waiting' || row.status === 'pending') {
        if (await this.#answer(row)) continue;
        if (row.runAt !== null && row.runAt > this.#clock.now()) {
          await this.#clock.set(row.runAt);
          continue;
        }
        if (row.status === 'waiting' && row.runAt === null) return { why: this.#stuck(row) };
      }
      if (Date.now() >= deadline) return { why: `it was still ${row.status}${row.wait ? ` (waiting: ${row.wait})` : ''} when the time allowed to a run ran out` };
      await (died ? Promise.race([delay(1), died]) : delay(1));
    }
  }

  /** Answers what the parked task waits for; true if something was sent or decided. */
  async #answer(row: TaskRow): Promise<boolean> {
    if (row.status !== 'waiting') return false;
    const wait = row.wait ? (JSON.parse(row.wait) as Record<string, unknown>) : null;
    const events = eventsOf(row);
    const approvals = approvalsOf(wait);
    // One signal at a time: the task may wait for another name once it has received this one.
    const signals = this.#answers.signals;
    const next = signals.findIndex((s, i) => !this.#sent.has(i) && events.includes(s.name));
    if (next >= 0) {
      this.#sent.add(next);
      const s = signals[next] as { name: string; payload?: unknown };
      await this.#signal(row, s.name, s.payload);
      return true;
    }
    let acted = false;
    for (const a of approvals) {
      const answer = this.#answers.approvals[a.name];
      if (!answer || this.#decided.has(a.id)) continue;
      this.#decided.add(a.id);
      await this.#decide(a, answer);
      acted = true;
    }
    if (acted) return true;
    const onWait = this.#answers.onWait;
    if (!onWait || (!events.length && !approvals.length) || this.#asked.has(row.version)) return false;
    this.#asked.add(row.version);
    const before = this.#acts;
    await onWait({
      taskId: this.#taskId,
      events,
      approvals: approvals.map((a) => ({ ...a, approvers: [...a.approvers] })),
      until: row.runAt,
      signal: async (name, payload) => {
        this.#acts++;
        await this.#signal(row, name, payload);
      },
      decide: async (approvalId, decision) => {
        this.#acts++;
        await this.#client.decide(approvalId, decision);
      },
    });
    return this.#acts > before;
  }

  /** Decides as `by`, or as each listed approver in turn until the approval is decided. */
  async #decide(a: ApprovalWait, answer: ApprovalAnswer): Promise<void> {
    const deciders = answer.by !== undefined ? [answer.by] : a.approvers.length ? a.approvers : ['checkResume'];
    for (const by of deciders) {
      const info = await this.#client.decide(a.id, {
        approve: answer.approve,
        by,
        ...(answer.comment !== undefined ? { comment: answer.comment } : {}),
        ...(answer.data !== undefined ? { data: answer.data } : {}),
      });
      if (info.status !== 'pending' && info.status !== 'escalated') return;
    }
  }

  /** A signal, or the event of a state machine that waits for it (`engine.send`). */
  async #signal(row: TaskRow, name: string, payload: unknown): Promise<void> {
    if (row.waitEvents?.includes(`${MACHINE_SIGNAL_PREFIX}${name}`)) await this.#client.send(this.#taskId, name, payload);
    else await this.#client.signal(this.#taskId, name, payload);
  }

  #stuck(row: TaskRow): string {
    const events = eventsOf(row);
    const approvals = approvalsOf(row.wait ? (JSON.parse(row.wait) as Record<string, unknown>) : null);
    const what = [...events.map((e) => `event "${e}"`), ...approvals.map((a) => `approval "${a.name}"`)].join(' or ') || 'something';
    const hint = [
      ...(events.length ? [`signals: { ${events.map((e) => `${JSON.stringify(e)}: payload`).join(', ')} }`] : []),
      ...(approvals.length ? [`approvals: { ${approvals.map((a) => `${JSON.stringify(a.name)}: { approve: true }`).join(', ')} }`] : []),
    ].join(' or ');
    return `it waits for ${what} with no timeout, and nothing answered it (pass ${hint || 'signals or approvals'}, or answer it in onWait)`;
  }
}
