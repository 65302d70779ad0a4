// What `stepwise show` and `stepwise ls` print of a task's progress (the formatting alone).
import { describe, expect, it } from 'vitest';
import { progressText, taskDetail, taskTable } from '../src/cli/format.ts';
import type { TaskInfo } from '../src/index.ts';

const task = (over: Partial<TaskInfo>): TaskInfo =>
  ({
    id: 't1',
    workflow: 'docs',
    workflowVersion: '1',
    input: null,
    idempotencyKey: null,
    createdAt: 0,
    updatedAt: 0,
    finishedAt: null,
    runAt: null,
    runs: 1,
    retries: 0,
    epoch: 1,
    lease: null,
    wait: null,
    pauseRequested: false,
    cancelReason: null,
    progress: null,
    deadline: null,
    status: 'running',
    steps: [],
    history: [],
    approvals: [],
    ...over,
  }) as TaskInfo;

describe('progress in the CLI', () => {
  it('shows what a running step reported in show and ls, and nothing once the task succeeded', () => {
    process.env.NO_COLOR = '1';
    const running = task({ progress: { done: 3, total: 10, note: 'documents', step: 'summarise', at: 0 } });
    expect(progressText(running)).toContain('3/10 documents');
    expect(progressText(running)).toContain('(summarise)');
    expect(taskDetail(running)).toMatch(/progress\s+3\/10 documents/);
    expect(taskTable([running])).toMatch(/PROGRESS[\s\S]*3\/10 documents/);
    expect(progressText(task({ progress: { done: 7, step: null, at: 0 } }))).toBe('7');
    expect(progressText(task({ status: 'succeeded', output: 1, progress: { done: 10, total: 10, step: 's', at: 0 } } as Partial<TaskInfo>))).toBe('');
    expect(taskDetail(task({}))).not.toContain('progress');
  });
});

describe('a failed cleanup in the CLI', () => {
  it("show marks a task whose cleanup after a cancel failed as needing manual cleanup, and numbers the cleanup's steps apart", () => {
    process.env.NO_COLOR = '1';
    const step = (seq: number, name: string, status: 'completed' | 'failed', cleanup: boolean) => ({
      seq,
      cleanup,
      name,
      kind: 'step' as const,
      status,
      attempts: 1,
      output: null,
      error: status === 'failed' ? { name: 'Error', message: 'mail server down' } : null,
      startedAt: 0,
      finishedAt: 5,
      durationMs: 5,
      wakeAt: null,
      idempotencyKey: null,
      epoch: 1,
    });
    const failed = task({
      status: 'failed',
      cancelReason: 'customer changed plans',
      error: {
        name: 'CompensationFailedError',
        code: 'COMPENSATION_FAILED',
        data: { cancelled: true },
        message: 'Task t1 was cancelled (reason: customer changed plans) and could not be fully undone: onCancel cleanup: mail server down. Manual cleanup is needed.',
      },
      steps: [step(0, 'reserve', 'completed', false), step(1_000_000_000, 'onCancel:notify', 'failed', true), step(1_000_000_001, 'compensate:reserve', 'completed', true)],
    } as Partial<TaskInfo>);
    const out = taskDetail(failed);
    expect(out).toMatch(/error\s+\[COMPENSATION_FAILED\] Task t1 was cancelled \(reason: customer changed plans\) .*Manual cleanup is needed\./);
    expect(out).toMatch(/cleanup\s+the task was cancelled, then its cleanup failed \(it is not retried\): manual cleanup is needed/);
    expect(out).toMatch(/cancel\s+customer changed plans/);
    expect(out).toMatch(/\n\s*0\s+reserve\s+completed/);
    expect(out).toMatch(/\n\s*c1\s+onCancel:notify\s+failed/);
    expect(out).toMatch(/\n\s*c2\s+compensate:reserve\s+completed/);
  });
});
