/**
 * @module commands/news
 * News about tasks handed to this process's workers and waiters on its local bus: news of its own
 * writes, and notifications from other processes (NOTIFY).
 */
import type { NewsBus } from '../news.ts';
import type { TaskRow, WakeEvent } from '../store.ts';

/**
 * Passes news about a task to the bus; `row`: the task as the write this news announces committed
 * it (only for a write of this process); `heldHere`: whether a worker of this process runs a task.
 */
export function deliverNews(bus: NewsBus, heldHere: (taskId: string) => boolean, e: WakeEvent, row?: TaskRow): void {
  if (e.taskIds) {
    // One notification for a batch of tasks: the same news of each.
    for (const taskId of e.taskIds) deliverNews(bus, heldHere, { reason: e.reason, taskId, ...(e.workflow ? { workflow: e.workflow } : {}) });
    return;
  }
  switch (e.reason) {
    case 'task':
      bus.publish({ type: 'task:ready', taskId: e.taskId, workflow: e.workflow ?? null });
      break;
    case 'cancel':
      bus.publish({ type: 'task:cancel', taskId: e.taskId, reason: e.cancelReason ?? null });
      break;
    case 'pause':
      bus.publish({ type: 'task:pause', taskId: e.taskId });
      break;
    case 'resume':
      bus.publish({ type: 'task:resume', taskId: e.taskId });
      break;
    case 'settled':
      if (row?.id === e.taskId) bus.publish({ type: 'task:settled', taskId: e.taskId, status: row.status, row });
      // A task a worker of this process runs: that worker announces the end of its run itself,
      // with the row when it wrote the end (the notification of that write may arrive first).
      else if (!heldHere(e.taskId)) bus.publish({ type: 'task:settled', taskId: e.taskId });
      break;
  }
}
