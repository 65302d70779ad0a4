-- stepwise_tasks.progress  what a long step last reported (`{ done, total, note, step, at }` as
--                          JSON), written by the run holding the lease, at most about once a
--                          second, without a journal row: for `show`, `ls` and pollers.

ALTER TABLE stepwise_tasks ADD COLUMN progress TEXT;
