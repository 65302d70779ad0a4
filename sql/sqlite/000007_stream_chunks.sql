-- stepwise_stream_chunks  the partial output of streaming model steps while they stream
--                         (`stepwise-engine/ai`): each row a batch of text deltas of one
--                         attempt of one step (`kind` 'delta'), or the reset frame that starts a
--                         retried attempt (`kind` 'reset': readers drop what the step streamed
--                         before). `id` orders a task's chunks; a reader resumes after the last id
--                         it saw. Written only by the run holding the task's lease. A step's rows
--                         are deleted once its stream finished: the stored transcript is the
--                         step's final output in the journal, so this table does not grow with
--                         finished streams.

CREATE TABLE stepwise_stream_chunks (
  id       INTEGER PRIMARY KEY,
  task_id  TEXT NOT NULL,
  step     TEXT NOT NULL,
  attempt  INTEGER NOT NULL,
  kind     TEXT NOT NULL CHECK (kind = 'delta' OR kind = 'reset'),
  delta    TEXT NOT NULL,
  at       INTEGER NOT NULL
);

CREATE INDEX stepwise_stream_chunks_task ON stepwise_stream_chunks (task_id, id);
