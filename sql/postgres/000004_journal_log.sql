-- steps.called_after  for a step called by the workflow code: how many results (by `done`) the
--                     code had received when it made the call. A retry of a failed task keeps
--                     the steps called before the code received the failure (branches that ran
--                     beside the failed step) and forgets those called after it (what the code did
--                     because of the failure). NULL for rows written before this column existed.
-- Adding a nullable column rewrites nothing; processes of the earlier version leave it NULL.

ALTER TABLE :SCHEMA.steps ADD COLUMN called_after INTEGER;
