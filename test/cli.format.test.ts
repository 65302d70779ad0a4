// What `stepwise show` and `stepwise ls` print of a task's progress (the formatting alone).
import { describe, expect, it } from 'vitest';
import { progressText, taskDetail, taskTable } from '../src/cli/format.ts';
import type { TaskInfo } from '../src/index.ts';

const task = (over: Partial<TaskInfo>): TaskInfo => ({
  id: 't1', workflow: 'docs', workflowVersion: '1', input: null, idempotencyKey: null, createdAt: 0, updatedAt: 0, finishedAt: null,
  runAt: null, runs: 1, retries: 0, epoch: 1, lease: null, wait: null, pauseRequested: false, cancelReason: null, progress: null, deadline: null,
  status: 'running', steps: [], history: [], approvals: [], ...over,
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
