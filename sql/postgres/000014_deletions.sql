-- deletions  one row per deleted task, written in the deletion's transaction, until the deletion
--            has been reported to observers (`onTasksDeleted`). A deleted task leaves no log of its
--            own: this record is how a deletion whose process died between its commit and its
--            report still reaches the observers of another process. `deliver_after`: until then
--            the process that deleted the task (or the one that claimed the record) reports it;
--            after, any process may.

CREATE TABLE :SCHEMA.deletions (
  id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id       TEXT COLLATE "C" NOT NULL,
  workflow      TEXT NOT NULL,
  status        TEXT NOT NULL,
  reason        TEXT NOT NULL,
  actor_kind    TEXT NOT NULL,
  actor_id      TEXT NOT NULL,
  at            BIGINT NOT NULL,
  deliver_after BIGINT NOT NULL
);
CREATE INDEX deletions_task ON :SCHEMA.deletions (task_id);
CREATE INDEX deletions_due ON :SCHEMA.deletions (deliver_after, id);
