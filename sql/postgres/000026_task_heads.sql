--! breaking-change: processes of an earlier version number log entries from `tasks.event_seq`,
-- which this migration moves; stop them before it runs (an earlier version refuses to start on a
-- schema that has it).
-- A narrow row per task for what every checkpoint reads and writes: its fence and its log counter.
--
-- task_heads  one row per task, written in the same statement as every write of the task's status,
--   epoch or lease owner (claims, lease expiry, transitions), which copies those columns from the
--   task row it wrote; and by every append to the task's log, which takes its numbers here.
--   A step's checkpoint updates this row alone: it checks the fence (epoch and a leased status)
--   on it, takes its log number from `event_seq`, and never touches the task row. Updating the
--   task row instead cost a step about half a raw INSERT more: an UPDATE opens and locks every
--   index of its table (13 on tasks) and copies the whole row (input and output included).
-- event_seq  the last seq of the task's log (moved from tasks.event_seq, see 000003): an append of
--   n entries runs `UPDATE task_heads SET event_seq = event_seq + n … RETURNING event_seq`.
-- Lock order: a statement that locks a task's row locks it before the task's head row; a
--   statement that locks several heads locks them in id order. A checkpoint locks only heads
--   (and on its own waits for nothing once it holds one; a transaction that also writes
--   transitions locks their task rows first), so heads never close a cycle of waits.
-- fillfactor 50: each step leaves a dead version of this row; room on its page keeps the
--   update heap-only (no index write; no column here but the key is indexed).

CREATE TABLE :SCHEMA.task_heads (
  id           TEXT COLLATE "C" PRIMARY KEY,
  status       TEXT NOT NULL,
  epoch        INTEGER NOT NULL,
  lease_owner  TEXT,
  event_seq    INTEGER NOT NULL
) WITH (fillfactor = 50);

INSERT INTO :SCHEMA.task_heads (id, status, epoch, lease_owner, event_seq)
  SELECT id, status, epoch, lease_owner, event_seq FROM :SCHEMA.tasks;

ALTER TABLE :SCHEMA.tasks DROP COLUMN event_seq;
