-- Tasks held back behind their concurrency key, out of the claim's index.
--
-- stepwise_tasks.held_by_key  A due task of a key that already has `limit` tasks leased or queued
--                             ahead of it (see 000015) is started held (1): it stays out of
--                             `stepwise_tasks_due_order` (the claim's index; it replaces
--                             `stepwise_tasks_due_priority`), so a claim never reads it while it
--                             cannot run. It is released (0) in due order when room opens in its
--                             key: by the triggers below when a task of the key lets go of its
--                             lease, ends before it ran, or is deleted, and by every worker's
--                             periodic release pass. A released task is still checked by the
--                             claim's key condition, so holding decides only which rows a claim
--                             reads, never how many of a key run.

ALTER TABLE stepwise_tasks ADD COLUMN held_by_key INTEGER NOT NULL DEFAULT 0;

DROP INDEX stepwise_tasks_due_priority;
CREATE INDEX stepwise_tasks_due_order ON stepwise_tasks ((run_at - priority * 1000), id) WHERE status IN ('pending', 'waiting') AND held_by_key = 0;
CREATE INDEX stepwise_tasks_key_held ON stepwise_tasks (concurrency_key) WHERE held_by_key = 1;

-- A leased task of a key lets go of its lease, or a queued one ends before it ran: the held tasks
-- now among the first `limit` minus leased of the key's queue (held tasks, and tasks due at the
-- write's time, in due order) are released.
CREATE TRIGGER stepwise_tasks_key_room AFTER UPDATE OF status ON stepwise_tasks
  WHEN OLD.concurrency_key IS NOT NULL AND (
    OLD.status IN ('running', 'cancelling') AND NEW.status NOT IN ('running', 'cancelling')
    OR OLD.status IN ('pending', 'waiting') AND NEW.status NOT IN ('pending', 'waiting', 'running', 'cancelling'))
BEGIN
  UPDATE stepwise_tasks SET held_by_key = 0 WHERE held_by_key = 1 AND id IN (
    SELECT x.id FROM stepwise_tasks x
    WHERE x.concurrency_key = NEW.concurrency_key AND x.status IN ('pending', 'waiting') AND (x.held_by_key = 1 OR x.run_at <= NEW.updated_at)
    ORDER BY (x.run_at - x.priority * 1000), x.id
    LIMIT max(0, NEW.concurrency_limit - (SELECT count(*) FROM stepwise_tasks y WHERE y.concurrency_key = NEW.concurrency_key AND y.status IN ('running', 'cancelling'))));
END;

-- A task of a key deleted while queued or leased: held tasks only count as its queue.
CREATE TRIGGER stepwise_tasks_key_delete AFTER DELETE ON stepwise_tasks
  WHEN OLD.concurrency_key IS NOT NULL AND OLD.status IN ('pending', 'waiting', 'running', 'cancelling')
BEGIN
  UPDATE stepwise_tasks SET held_by_key = 0 WHERE held_by_key = 1 AND id IN (
    SELECT x.id FROM stepwise_tasks x
    WHERE x.concurrency_key = OLD.concurrency_key AND x.status IN ('pending', 'waiting') AND x.held_by_key = 1
    ORDER BY (x.run_at - x.priority * 1000), x.id
    LIMIT max(0, OLD.concurrency_limit - (SELECT count(*) FROM stepwise_tasks y WHERE y.concurrency_key = OLD.concurrency_key AND y.status IN ('running', 'cancelling'))));
END;

-- A held task whose status changes (cancelled while it waited, say) is no longer held.
CREATE TRIGGER stepwise_tasks_unhold_on_status AFTER UPDATE OF status ON stepwise_tasks
  WHEN OLD.held_by_key = 1 AND NEW.status <> OLD.status
BEGIN
  UPDATE stepwise_tasks SET held_by_key = 0 WHERE no = NEW.no;
END;
