-- Tasks held back behind their concurrency key, out of the claim's index.
--
-- tasks.held_by_key  A due task of a key that already has `limit` tasks leased or queued ahead of
--                    it (see 000015) is started held: it stays out of `tasks_due_order` (the
--                    claim's index; it replaces `tasks_due_priority`), so a claim never reads it
--                    while it cannot run. It is released (set false) in due order when room opens
--                    in its key: by the triggers below when a task of the key lets go of its
--                    lease, ends before it ran, or is deleted, and by every worker's periodic
--                    release pass (`release_held` for every key with held tasks), which catches a
--                    release that ran beside a start and did not see it. A held task is never
--                    claimed, and a released one is still checked by the claim's key condition, so
--                    holding decides only which rows a claim reads, never how many of a key run.
-- A boolean with a constant default rewrites nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN held_by_key BOOLEAN NOT NULL DEFAULT false;

DROP INDEX :SCHEMA.tasks_due_priority;
CREATE INDEX tasks_due_order ON :SCHEMA.tasks ((run_at - priority::bigint * 1000), id) WHERE status IN ('pending', 'waiting') AND NOT held_by_key;
CREATE INDEX tasks_key_held ON :SCHEMA.tasks (concurrency_key) WHERE held_by_key;

-- Releases the held tasks of key `p_key` now among the first `p_limit` minus leased of its queue
-- (held tasks, and tasks due at `p_now`, in due order; `p_now` NULL: held tasks only). Rows another
-- transaction holds are passed over (SKIP LOCKED), so a release never waits inside a lease's end;
-- the sweep takes what it passed. Returns how many it released.
CREATE FUNCTION :SCHEMA.release_held(p_key TEXT, p_limit INTEGER, p_now BIGINT) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  n integer;
BEGIN
  UPDATE :SCHEMA.tasks SET held_by_key = false WHERE id IN (
    SELECT y.id FROM :SCHEMA.tasks y WHERE y.held_by_key AND y.id IN (
      SELECT q.id FROM (
        SELECT x.id FROM :SCHEMA.tasks x
        WHERE x.concurrency_key = p_key AND x.status IN ('pending', 'waiting') AND (x.held_by_key OR x.run_at <= p_now)
        ORDER BY (x.run_at - x.priority::bigint * 1000), x.id
        LIMIT greatest(0, p_limit - (SELECT count(*) FROM :SCHEMA.concurrency_slots s WHERE s.key = p_key))
      ) q)
    FOR UPDATE SKIP LOCKED);
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END $$;

-- A leased task of a key lets go of its lease: its slot goes, and the next of the key are released.
CREATE OR REPLACE FUNCTION :SCHEMA.release_concurrency_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM :SCHEMA.concurrency_slots WHERE task_id = NEW.id;
  PERFORM :SCHEMA.release_held(NEW.concurrency_key, NEW.concurrency_limit, NEW.updated_at);
  RETURN NULL;
END $$;

-- A queued task of a key ends before it ran (cancelled, or failed by a deadline): it stood in the
-- queue, so the next may now be at its head.
CREATE FUNCTION :SCHEMA.release_after_queued_end() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM :SCHEMA.release_held(NEW.concurrency_key, NEW.concurrency_limit, NEW.updated_at);
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_queued_end AFTER UPDATE OF status ON :SCHEMA.tasks FOR EACH ROW
  WHEN (OLD.concurrency_key IS NOT NULL AND OLD.status IN ('pending', 'waiting') AND NEW.status NOT IN ('pending', 'waiting', 'running', 'cancelling'))
  EXECUTE FUNCTION :SCHEMA.release_after_queued_end();

-- A task of a key deleted while queued or leased: its slot goes (this trigger replaces the slot's
-- foreign key, whose check cost every keyed claim an index probe and a row lock), and the next of
-- its key are released.
ALTER TABLE :SCHEMA.concurrency_slots DROP CONSTRAINT concurrency_slots_task_id_fkey;
CREATE FUNCTION :SCHEMA.release_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM :SCHEMA.concurrency_slots WHERE task_id = OLD.id;
  PERFORM :SCHEMA.release_held(OLD.concurrency_key, OLD.concurrency_limit, NULL);
  RETURN NULL;
END $$;
CREATE TRIGGER tasks_keyed_delete AFTER DELETE ON :SCHEMA.tasks FOR EACH ROW
  WHEN (OLD.concurrency_key IS NOT NULL AND OLD.status IN ('pending', 'waiting', 'running', 'cancelling'))
  EXECUTE FUNCTION :SCHEMA.release_after_delete();

-- A held task whose status changes (cancelled while it waited, say) is no longer held.
CREATE FUNCTION :SCHEMA.unhold_on_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.held_by_key := false;
  RETURN NEW;
END $$;
CREATE TRIGGER tasks_unhold_on_status BEFORE UPDATE OF status ON :SCHEMA.tasks FOR EACH ROW
  WHEN (OLD.held_by_key AND NEW.status IS DISTINCT FROM OLD.status)
  EXECUTE FUNCTION :SCHEMA.unhold_on_status();
