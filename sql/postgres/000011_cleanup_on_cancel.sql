-- tasks.cleanup_on_cancel  true when the last run of the task ended with cleanup to do if the task
--                          is cancelled: `ctx.onCancel` handlers registered, or completed steps with
--                          a compensation. A cancel of such a task while it is pending, waiting or
--                          paused goes through `cancelling`, so that a worker replays it and runs its
--                          cleanup; without it the cancel is immediate. A constant default rewrites
--                          nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN cleanup_on_cancel BOOLEAN NOT NULL DEFAULT FALSE;
