-- stepwise_tasks.deadline_at  when the task must be finished (ms since the epoch), or NULL: set at
--                             start from `engine.start(…, { deadline })` and the workflow's
--                             `timeout`. A run past it fails the task with DEADLINE_EXCEEDED; a
--                             task parked beyond it is woken at it.

ALTER TABLE stepwise_tasks ADD COLUMN deadline_at INTEGER;
