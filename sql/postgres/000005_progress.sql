-- tasks.progress  what a long step last reported (`{ done, total, note, step, at }` as JSON),
--                 written by the run holding the lease, at most about once a second, without a
--                 journal row: for `show`, `ls` and pollers. A nullable column rewrites nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN progress TEXT;
