/**
 * @module cli/approvals
 * The approval commands of the CLI (`approvals`, `approve`, `reject`) and how approvals read in
 * `show` and in timelines. Uses only the public library API.
 */
import { InvalidArgumentError, type ApprovalEvent, type ApprovalInfo, type ApprovalStatus } from '../index.ts';
import { keyOption, need, parseJson, str, withEngine, type CommandContext } from './context.ts';
import { bold, colorStatus, dim, table, time } from './style.ts';

const when = (d: Date | null): string => (d ? time(d.getTime()) : '-');

/** An approval's lines in `show`: its state, then its audit trail of decisions. */
export function approvalLines(a: ApprovalInfo): string {
  const out = [
    `  ${bold(a.name)} ${a.id}  ${colorStatus(a.status)}${a.level > 1 ? dim(` level ${a.level}`) : ''}`,
    `    approvers  ${a.approvers.length ? a.approvers.join(', ') : 'anyone'}${a.quorum > 1 ? `   quorum ${a.quorum}` : ''}`,
    `    asked      ${when(a.createdAt)}${a.deadline ? `   deadline ${when(a.deadline)}` : ''}${a.decidedAt ? `   decided ${when(a.decidedAt)}` : ''}`,
  ];
  for (const d of a.decisions) {
    out.push(
      `    ${dim(when(d.at))} ${d.by} ${d.approve ? colorStatus('succeeded').replace('succeeded', 'approved') : colorStatus('failed').replace('failed', 'rejected')}${d.comment ? `: ${d.comment}` : ''}${d.idempotencyKey ? dim(` key=${d.idempotencyKey}`) : ''}`,
    );
  }
  if (a.outcome?.timedOut) out.push(`    ${dim('settled by its timeout policy:')} ${a.outcome.approved ? 'approved' : 'rejected'} after ${a.outcome.escalations} escalation(s)`);
  if (a.status === 'pending' || a.status === 'escalated') out.push(dim(`    decide: stepwise approve ${a.id} --as <name>   |   stepwise reject ${a.id} --as <name>`));
  return out.join('\n');
}

export function describeApprovalEvent(e: ApprovalEvent): string {
  const d = e.detail;
  const what = e.type.slice('approval:'.length);
  const tail = (() => {
    switch (e.type) {
      case 'approval:requested':
        return `from ${Array.isArray(d.approvers) && d.approvers.length ? (d.approvers as string[]).join(', ') : 'anyone'}${typeof d.deadline === 'number' ? ` until ${time(d.deadline)}` : ''}`;
      case 'approval:decision':
        return `${d.approve ? 'approve' : 'reject'}${typeof d.comment === 'string' ? `: ${d.comment}` : ''}`;
      case 'approval:reminded':
        return `next ${typeof d.nextReminder === 'number' ? time(d.nextReminder) : '-'}`;
      case 'approval:escalated':
        return `to level ${String(d.level)}, adding ${Array.isArray(d.added) ? (d.added as string[]).join(', ') : ''}`;
      case 'approval:decided':
        return String(d.status);
    }
  })();
  return `${bold(what.padEnd(8))} ${e.name} ${dim(e.approvalId)} ${tail}`;
}

export async function approvals(ctx: CommandContext): Promise<void> {
  const statusOpt = str(ctx.options, 'status');
  const statuses = ctx.options.pending === true ? (['pending', 'escalated'] as ApprovalStatus[]) : (statusOpt?.split(',').map((s) => s.trim()) as ApprovalStatus[] | undefined);
  await withEngine(ctx, async (engine) => {
    const list = await engine.approvals({
      ...(statuses ? { status: statuses } : {}),
      ...(str(ctx.options, 'approver') ? { approver: str(ctx.options, 'approver') } : {}),
      ...(str(ctx.options, 'workflow') ? { workflow: str(ctx.options, 'workflow') } : {}),
    });
    if (ctx.json) return ctx.out(JSON.stringify(list));
    if (!list.length) return ctx.out(dim('(no approvals)'));
    ctx.out(
      table(
        ['ID', 'NAME', 'TASK', 'STATUS', 'APPROVERS', 'DEADLINE', 'ASKED'],
        list.map((a) => [a.id, a.name, a.taskId, colorStatus(a.status), a.approvers.join(',') || 'anyone', when(a.deadline), when(a.createdAt)]),
      ),
    );
  });
}

function decideCommand(approve: boolean) {
  return async (ctx: CommandContext): Promise<void> => {
    const verb = approve ? 'approve' : 'reject';
    const id = need(ctx, 0, `approval id (stepwise ${verb} <approval-id> --as NAME)`);
    const as = str(ctx.options, 'as');
    if (!as?.trim()) throw new InvalidArgumentError(`stepwise ${verb} needs --as NAME: who decides (checked against the approval's approvers and recorded).`);
    const data = parseJson(str(ctx.options, 'data'), '--data');
    const key = keyOption(ctx);
    const comment = str(ctx.options, 'comment');
    await withEngine(ctx, async (engine) => {
      const a = await engine.decide(id, {
        approve,
        by: as,
        ...(comment !== undefined ? { comment } : {}),
        ...(data !== undefined ? { data } : {}),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
      });
      ctx.out(ctx.json ? JSON.stringify(a) : `${a.id} (${a.name}, task ${a.taskId}) → ${colorStatus(a.status)}`);
    });
  };
}

export const approve = decideCommand(true);
export const reject = decideCommand(false);
