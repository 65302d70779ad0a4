/**
 * @module server/observers/logs
 * Structured JSON logs (pino) of the work, as an {@link Observer}: one line per transition (with
 * the actor), per step attempt that ended or failed, per signal, per approval decision (with the
 * approver as actor), per approval notice (requested, reminded, escalated, decided), per model
 * call (tokens, cost), per idempotency hit, conflict and take-over, per dwell alert, and per batch
 * of deleted tasks (their ids, why, by whom), with task, workflow, step, attempt and worker ids.
 * Payloads (inputs, outputs, signal data, approval payloads, decision comments and edited data)
 * are not logged: they may hold personal data; the log says what happened and who did it.
 * @example
 * const engine = new Engine({ observers: [createLogObserver(pino())] });
 */
import type { Logger } from 'pino';
import type { Observer } from '../../index.ts';

export function createLogObserver(logger: Logger): Observer {
  return { name: 'pino', ...runHooks(logger), ...featureHooks(logger), onEvent: (e) => logEntry(logger, e) };
}

/** Runs, step attempts and the worker's own errors. */
function runHooks(logger: Logger): Pick<Observer, 'onRunStart' | 'onRunEnd' | 'onStepEnd' | 'onStepError' | 'onWorkerError'> {
  return {
    onRunStart: (r) => logger.info({ msg: 'run started', taskId: r.taskId, workflow: r.workflow, epoch: r.epoch, workerId: r.workerId, reclaimed: r.reclaimed }),
    onRunEnd: (r) => logger.info({ msg: 'run ended', taskId: r.taskId, workflow: r.workflow, epoch: r.epoch, workerId: r.workerId, status: r.status, durationMs: r.durationMs }),
    onStepEnd: (a) => logger.info({ msg: 'step completed', taskId: a.taskId, workflow: a.workflow, step: a.step, attempt: a.attempt, workerId: a.workerId, durationMs: a.durationMs }),
    onStepError: (a) =>
      logger[a.retrying ? 'warn' : 'error']({
        msg: a.retrying ? 'step attempt failed, retrying' : 'step failed',
        taskId: a.taskId,
        workflow: a.workflow,
        step: a.step,
        attempt: a.attempt,
        workerId: a.workerId,
        delayMs: a.delayMs,
        error: { name: a.error.name, message: a.error.message, code: (a.error as { code?: unknown }).code },
      }),
    onWorkerError: (e) => logger.error({ msg: 'worker error', workerId: e.workerId, during: e.during, error: { name: e.error.name, message: e.error.message } }),
  };
}

/** Approval notices, deletions, idempotency records and dwell alerts. */
function featureHooks(logger: Logger): Pick<Observer, 'onApproval' | 'onTasksDeleted' | 'onIdempotency' | 'onDwellAlert' | 'onAlert'> {
  return {
    onApproval: (n) => {
      const a = n.approval;
      logger.info({
        msg: `approval ${n.kind}`,
        taskId: a.taskId,
        workflow: a.workflow,
        approvalId: a.id,
        approval: a.name,
        status: a.status,
        level: a.level,
        approvers: a.approvers,
        deadline: a.deadline?.toISOString() ?? null,
        decisions: a.decisions.length,
        ...(a.outcome ? { approved: a.outcome.approved, by: a.outcome.by, timedOut: a.outcome.timedOut } : {}),
      });
    },
    onTasksDeleted: (e) =>
      logger.info({
        msg: 'tasks deleted',
        reason: e.reason,
        actor: e.by,
        count: e.tasks.length,
        tasks: e.tasks.map((t) => ({ taskId: t.id, workflow: t.workflow, status: t.status })),
      }),
    onIdempotency: (e) =>
      logger.info({
        msg: `idempotency ${e.type}`,
        key: e.key,
        backend: e.backend,
        taskId: e.taskId,
        ...(e.step !== undefined ? { step: e.step } : {}),
        ...(e.previousOwner !== undefined ? { previousOwner: e.previousOwner } : {}),
        ...(e.ranByTask !== undefined ? { ranByTask: e.ranByTask } : {}),
      }),
    onDwellAlert: (a) =>
      logger.warn({
        msg: 'dwell alert',
        taskId: a.taskId,
        workflow: a.workflow,
        status: a.status,
        afterMs: a.afterMs,
        since: new Date(a.since).toISOString(),
        at: new Date(a.at).toISOString(),
      }),
    onAlert: (a) => logger.warn({ msg: `alert: ${a.message}`, kind: a.kind, subject: a.subject, workflow: a.workflow, taskId: a.taskId, data: a.data }),
  };
}

/** One line per log entry of the kinds logged (payloads left out). */
function logEntry(logger: Logger, e: Parameters<NonNullable<Observer['onEvent']>>[0]): void {
  const actor = { kind: e.actor.kind, id: e.actor.id };
  switch (e.type) {
    case 'transition':
      logger.info({
        msg: 'transition',
        taskId: e.taskId,
        seq: e.seq,
        event: e.event,
        from: e.from,
        to: e.to,
        actor,
        ...(e.epoch !== undefined ? { epoch: e.epoch } : {}),
        ...(e.detail ? { detail: e.detail } : {}),
      });
      break;
    case 'signal:received':
      logger.info({ msg: 'signal received', taskId: e.taskId, seq: e.seq, signal: e.name, actor, idempotencyKey: e.idempotencyKey });
      break;
    case 'signal:consumed':
      logger.info({ msg: 'signal consumed', taskId: e.taskId, seq: e.seq, signalId: e.signalId, actor });
      break;
    case 'approval:decision':
      logger.info({
        msg: 'approval decision',
        taskId: e.taskId,
        seq: e.seq,
        approvalId: e.approvalId,
        approval: e.name,
        approve: e.detail.approve,
        actor,
        idempotencyKey: e.detail.idempotencyKey ?? null,
      });
      break;
    case 'usage:attempt':
      logger.info({
        msg: 'model call',
        taskId: e.taskId,
        seq: e.seq,
        step: e.usage.step,
        attempt: e.usage.attempt,
        model: e.usage.model,
        outcome: e.usage.outcome,
        inputTokens: e.usage.inputTokens,
        outputTokens: e.usage.outputTokens,
        costUsd: e.usage.costUsd,
        estimated: e.usage.estimated,
        actor,
      });
      break;
    case 'unknown':
      // Entries of capabilities this module does not know in detail.
      logger.info({ msg: e.original, taskId: e.taskId, seq: e.seq, actor });
      break;
    default:
      break;
  }
}
