/**
 * @module errors/approval
 * Errors of approvals: an approval id nobody issued, a decision for a task that has ended, and a
 * step guarded by `requires` whose approval was not given.
 */

import { ERROR_CODES } from './codes.ts';
import { StepwiseError } from './base.ts';

/** An approval id that names no approval. */
export class ApprovalNotFoundError extends StepwiseError {
  readonly approvalId: string;
  constructor(approvalId: string) {
    super(ERROR_CODES.NOT_FOUND, `No approval with id "${approvalId}". List open approvals with \`stepwise approvals --pending\`.`);
    this.name = 'ApprovalNotFoundError';
    this.approvalId = approvalId;
  }
}

/** A decision for a task that has ended (or is being cancelled): nothing was recorded. */
export class TaskEndedError extends StepwiseError {
  readonly taskId: string;
  readonly status: string;
  constructor(taskId: string, status: string, what: string) {
    super(ERROR_CODES.TASK_ENDED, `Task ${taskId} is ${status}: ${what} was not recorded. A ${status} task takes no decisions; start a new task if the work is still wanted.`);
    this.name = 'TaskEndedError';
    this.taskId = taskId;
    this.status = status;
  }
}

/** A step guarded by `requires` ran without its approval approved: it fails for good. */
export class ApprovalRequiredError extends StepwiseError {
  readonly stepName: string;
  readonly approval: string;
  constructor(stepName: string, approval: string, why: string) {
    super(ERROR_CODES.FORBIDDEN, `Step "${stepName}" requires approval "${approval}", which ${why}: the engine refused to run it.`, { retryable: false });
    this.name = 'ApprovalRequiredError';
    this.stepName = stepName;
    this.approval = approval;
  }
}

/**
 * A decision that came after the approval's deadline, once its timeout policy settled it (code
 * `FORBIDDEN`): nothing was recorded. `outcome` is what the policy did.
 */
export class ApprovalExpiredError extends StepwiseError {
  readonly approvalId: string;
  readonly deadline: number | null;
  readonly outcome: 'rejected' | 'approved';
  constructor(approvalId: string, name: string, deadline: number | null, outcome: 'rejected' | 'approved', actor: string) {
    const at = deadline === null ? 'its deadline' : `its deadline (${new Date(deadline).toISOString()})`;
    super(
      ERROR_CODES.FORBIDDEN,
      `The decision by ${actor} on approval ${approvalId} ("${name}") came after ${at}: the approval expired and its timeout policy ${outcome} it. No decision was recorded; the task goes on with the timed-out outcome.`,
    );
    this.name = 'ApprovalExpiredError';
    this.approvalId = approvalId;
    this.deadline = deadline;
    this.outcome = outcome;
  }
}
