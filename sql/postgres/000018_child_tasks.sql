-- tasks.parent_id  The task that started this one with `ctx.startChild` / `ctx.child`, or NULL.
--                  When a task with a parent ends (succeeded, failed, cancelled), the same
--                  transaction records a signal `child:<id>` to the parent (its payload the
--                  child's status, output and error), makes the parent due if it waits for it,
--                  and wakes the workers.
-- tasks.root_id    The first task of the tree (the parent's root, or the parent), or NULL.
-- tasks.depth      0 for a task started from outside, the parent's depth + 1 for a child.
-- Nullable columns and a constant default rewrite nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN parent_id TEXT;
ALTER TABLE :SCHEMA.tasks ADD COLUMN root_id TEXT;
ALTER TABLE :SCHEMA.tasks ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_parent ON :SCHEMA.tasks (parent_id, id) WHERE parent_id IS NOT NULL;
CREATE INDEX tasks_root ON :SCHEMA.tasks (root_id, id) WHERE root_id IS NOT NULL;
