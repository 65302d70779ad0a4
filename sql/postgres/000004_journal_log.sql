-- steps.called_after  for a step called by the workflow code: how many results (by `done`) the
--                     code had received when it made the call. A retry of a failed task keeps
--                     the steps called before the code received the failure (branches that ran
--                     beside the failed step) and forgets those called after it (what the code did
--                     because of the failure). NULL for rows written before this column existed.
-- Adding a nullable column rewrites nothing; processes of the earlier version leave it NULL.

ALTER TABLE :SCHEMA.steps ADD COLUMN called_after INTEGER;

-- steps.log_seq  the seq, in the task's event log, of the entry this row carries: a step's result
--                (completed or failed) is read from its journal row rather than written twice,
--                so a checkpoint stays one row. NULL on rows that carry no entry (a wait in
--                progress, a retry due: those have rows of their own in `events`).

ALTER TABLE :SCHEMA.steps ADD COLUMN log_seq INTEGER;
