-- stepwise_tasks.tags  The task's tags as a JSON object of strings (`{"tenant":"acme"}`), or NULL:
--                      set at start (`start(..., { tags })`) and merged by `ctx.setTags` /
--                      `engine.setTags`. Read with the row, for `get`, `ls` and the dashboard.
-- stepwise_task_tags   One row per tag of a task, the index `list({ tags })` searches: a tag's
--                      tasks, newest first, come from one backward range scan of the primary key
--                      (key, value, task_id). Written in the same transaction as the column;
--                      deleted with the task.

ALTER TABLE stepwise_tasks ADD COLUMN tags TEXT;
CREATE TABLE stepwise_task_tags (
  key     TEXT NOT NULL,
  value   TEXT NOT NULL,
  task_id TEXT NOT NULL,
  PRIMARY KEY (key, value, task_id)
) WITHOUT ROWID;
CREATE INDEX stepwise_task_tags_task ON stepwise_task_tags (task_id);
