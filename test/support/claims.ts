// A worker's claim request as the store tests make it by hand: workflow "wf", the lifecycle's
// claim and reclaim edges, a lease of a minute.
import { sourcesOf, type TaskStatus } from '../../src/lifecycle.ts';
import type { ClaimRequest } from '../../src/store.ts';

export function claimOf(workerId: string, now: number, limit = 10): ClaimRequest {
  return {
    workerId,
    now,
    leaseMs: 60_000,
    limit,
    workflows: ['wf'],
    claim: { from: sourcesOf('claim'), to: 'running' as TaskStatus },
    reclaim: { from: sourcesOf('reclaim'), to: { running: 'running', cancelling: 'cancelling' } as Partial<Record<TaskStatus, TaskStatus>> },
  };
}
