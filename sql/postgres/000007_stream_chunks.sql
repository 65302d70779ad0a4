-- stream_chunks  the partial output of streaming model steps while they stream
--                (`stepwise-engine/ai`): each row a batch of text deltas of one attempt of one
--                step (`kind` 'delta'), or the reset frame that starts a retried attempt (`kind`
--                'reset': readers drop what the step streamed before). `id` orders a task's
--                chunks: they are written by one run at a time, each write awaited before the
--                next, so a task's ids grow in commit order; a reader resumes after the last id
--                it saw. A step's rows are deleted once its stream finished: the stored
--                transcript is the step's final output in the journal, so this table does not
--                grow with finished streams.

CREATE TABLE :SCHEMA.stream_chunks (
  id       BIGSERIAL PRIMARY KEY,
  task_id  TEXT NOT NULL,
  step     TEXT NOT NULL,
  attempt  INTEGER NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('delta', 'reset')),
  delta    TEXT NOT NULL,
  at       BIGINT NOT NULL
);

CREATE INDEX stream_chunks_task ON :SCHEMA.stream_chunks (task_id, id);
