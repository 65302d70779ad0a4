-- Flow control: limits per key and priorities (workflow option `concurrency: { key, limit }`,
-- start option `priority`).
--
-- concurrency_key    the key computed from the input at start (NULL: no per-key limit).
-- concurrency_limit  at most this many tasks of the key hold a lease at once. SQLite has one
--                    writer: a claim counts the key's leased tasks in its write transaction.
-- priority           0..1000, higher first; claims order due tasks by `run_at - priority * 1000`
--                    (a task of priority p is treated as if it had waited p seconds longer).

ALTER TABLE stepwise_tasks ADD COLUMN concurrency_key TEXT;
ALTER TABLE stepwise_tasks ADD COLUMN concurrency_limit INTEGER;
ALTER TABLE stepwise_tasks ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

CREATE INDEX stepwise_tasks_due_priority ON stepwise_tasks ((run_at - priority * 1000), id) WHERE status IN ('pending', 'waiting');
CREATE INDEX stepwise_tasks_concurrency_key ON stepwise_tasks (concurrency_key, status) WHERE concurrency_key IS NOT NULL;
-- A key's due queue, for a claim's head-of-queue check (a task is a candidate only when fewer than
-- its key's free places are due before it).
CREATE INDEX stepwise_tasks_key_due ON stepwise_tasks (concurrency_key, (run_at - priority * 1000), id) WHERE status IN ('pending', 'waiting') AND concurrency_key IS NOT NULL;
