-- stepwise_steps.called_after  for a step called by the workflow code: how many results (by
--                              `done`) the code had received when it made the call. A retry of a
--                              failed task keeps the steps called before the code received the
--                              failure (branches that ran beside the failed step) and forgets those
--                              called after it. NULL for rows written before this column existed.

ALTER TABLE stepwise_steps ADD COLUMN called_after INTEGER;
