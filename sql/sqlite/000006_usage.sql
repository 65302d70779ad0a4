-- stepwise_tasks.usage  the task's model usage so far (JSON, see src/ai/usage.ts): tokens and cost
--                       summed per step and for the task, the calls in flight (so that a call a
--                       crash cut short is still billed on resume), and the budget the task was
--                       started with. Written by the run holding the lease, with the `usage:*`
--                       log entries of each attempt, in one transaction; NULL for a task that
--                       never called a model.

ALTER TABLE stepwise_tasks ADD COLUMN usage TEXT;
