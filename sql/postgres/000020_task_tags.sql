-- tasks.tags  The task's tags as a JSON object of strings (`{"tenant":"acme"}`), or NULL: set at
--             start (`start(..., { tags })`) and merged by `ctx.setTags` / `engine.setTags`.
--             Read with the row, for `get`, `ls` and the dashboard.
-- task_tags   One row per tag of a task, the index `list({ tags })` searches: a tag's tasks, newest
--             first, come from one backward range scan of the primary key (key, value, task_id).
--             Written in the same transaction as `tasks.tags`; deleted with the task.
-- A nullable column rewrites nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN tags TEXT;
CREATE TABLE :SCHEMA.task_tags (
  key     TEXT COLLATE "C" NOT NULL,
  value   TEXT COLLATE "C" NOT NULL,
  task_id TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (key, value, task_id)
);
CREATE INDEX task_tags_task ON :SCHEMA.task_tags (task_id);
