-- Flow control: limits per key and priorities (workflow option `concurrency: { key, limit }`,
-- start option `priority`).
--
-- tasks.concurrency_key    the key computed from the input at start (NULL: no per-key limit).
-- tasks.concurrency_limit  at most this many tasks of the key hold a lease at once.
-- tasks.priority           0..1000, higher first; claims order due tasks by
--                          `run_at - priority * 1000` (a task of priority p is treated as if it
--                          had waited p seconds longer, so lower priorities still age forward).
--
-- concurrency_slots  one row per leased task of a key: `slot` is 1..limit and (key, slot) is
--                    unique. A claim takes a slot with INSERT … ON CONFLICT DO NOTHING in its one
--                    statement; a unique index sees concurrent inserts whatever the snapshot, so
--                    two claimers can never both take the last slot of a key. The slot goes when
--                    the task stops holding a lease (the trigger below, whatever write ends it) or
--                    is deleted (the foreign key); an expired lease keeps its slot until it is
--                    reclaimed (the reclaim keeps it) or ended.

ALTER TABLE :SCHEMA.tasks
  ADD COLUMN concurrency_key TEXT,
  ADD COLUMN concurrency_limit INTEGER,
  ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

CREATE INDEX tasks_due_priority ON :SCHEMA.tasks ((run_at - priority::bigint * 1000), id) WHERE status IN ('pending', 'waiting');
-- A key's due queue, for a claim's head-of-queue check (a task is a candidate only when fewer than
-- its key's free slots are due before it).
CREATE INDEX tasks_key_due ON :SCHEMA.tasks (concurrency_key, (run_at - priority::bigint * 1000), id) WHERE status IN ('pending', 'waiting') AND concurrency_key IS NOT NULL;

CREATE TABLE :SCHEMA.concurrency_slots (
  key     TEXT NOT NULL,
  slot    INTEGER NOT NULL,
  task_id TEXT NOT NULL UNIQUE REFERENCES :SCHEMA.tasks (id) ON DELETE CASCADE,
  PRIMARY KEY (key, slot)
);

CREATE FUNCTION :SCHEMA.release_concurrency_slot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM :SCHEMA.concurrency_slots WHERE task_id = NEW.id;
  RETURN NULL;
END $$;

CREATE TRIGGER tasks_release_slot AFTER UPDATE OF status ON :SCHEMA.tasks FOR EACH ROW
  WHEN (OLD.concurrency_key IS NOT NULL AND OLD.status IN ('running', 'cancelling') AND NEW.status NOT IN ('running', 'cancelling'))
  EXECUTE FUNCTION :SCHEMA.release_concurrency_slot();
