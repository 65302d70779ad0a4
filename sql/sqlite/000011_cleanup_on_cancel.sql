-- stepwise_tasks.cleanup_on_cancel  1 when the last run of the task ended with cleanup to do if
--                                   the task is cancelled: `ctx.onCancel` handlers registered, or
--                                   completed steps with a compensation. A cancel of such a task
--                                   while it is pending, waiting or paused goes through
--                                   `cancelling`, so that a worker replays it and runs its cleanup;
--                                   without it the cancel is immediate.

ALTER TABLE stepwise_tasks ADD COLUMN cleanup_on_cancel INTEGER NOT NULL DEFAULT 0;
