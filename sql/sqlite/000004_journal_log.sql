-- stepwise_steps.called_after  for a step called by the workflow code: how many results (by
--                              `done`) the code had received when it made the call. A retry of a
--                              failed task keeps the steps called before the code received the
--                              failure (branches that ran beside the failed step) and forgets those
--                              called after it. NULL for rows written before this column existed.

ALTER TABLE stepwise_steps ADD COLUMN called_after INTEGER;

-- stepwise_steps.log_seq  the seq, in the task's event log, of the entry this row carries: a
--                         step's result (completed or failed) is read from its journal row rather
--                         than written twice, so a checkpoint stays one row. NULL on rows that
--                         carry no entry (a wait in progress, a retry due: those have entries of
--                         their own in stepwise_events).
-- Entries in stepwise_events and entries carried by journal rows share one numbering per task: a
-- write takes the next seqs inside its write transaction (one writer at a time), from the larger
-- of the two maxima (or from the store's cache while no other connection has written).

ALTER TABLE stepwise_steps ADD COLUMN log_seq INTEGER;
