-- stepwise_deletions  one row per deleted task, written in the deletion's transaction, until the
--                     deletion has been reported to observers (`onTasksDeleted`). A deleted task
--                     leaves no log of its own: this record is how a deletion whose process died
--                     between its commit and its report still reaches the observers of another
--                     process. `deliver_after`: until then the process that deleted the task (or
--                     the one that claimed the record) reports it; after, any process may.

CREATE TABLE stepwise_deletions (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  task_id       TEXT NOT NULL,
  workflow      TEXT NOT NULL,
  status        TEXT NOT NULL,
  reason        TEXT NOT NULL,
  actor_kind    TEXT NOT NULL,
  actor_id      TEXT NOT NULL,
  at            INTEGER NOT NULL,
  deliver_after INTEGER NOT NULL
);
CREATE INDEX stepwise_deletions_task ON stepwise_deletions (task_id);
CREATE INDEX stepwise_deletions_due ON stepwise_deletions (deliver_after, id);
