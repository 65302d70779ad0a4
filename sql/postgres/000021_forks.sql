-- tasks.forked_from  The task this one was forked from (`engine.fork`), or NULL. A fork starts
--                    with a copy of the completed journal rows of that task before the fork's
--                    step; the fork's first log entry names the task and the step.
-- A nullable column rewrites nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN forked_from TEXT;
CREATE INDEX tasks_forked_from ON :SCHEMA.tasks (forked_from, id) WHERE forked_from IS NOT NULL;
