--! breaking-change: processes of an earlier version write `history`, which this migration drops;
-- stop them before it runs (an earlier version refuses to start on a schema that has it).
-- The history table becomes a per-task append-only event log.
--
-- events  the entries of a task's log stored on their own: transitions, signals, journal writes
--         that are not a step's result (migration 4 lets a result's journal row carry its entry).
--         `data` is JSON text in the format of src/log-entries.ts.
--   seq   numbers a task's entries 1, 2, 3… without gaps, in commit order. It is allocated from
--         the counter `tasks.event_seq`: every write that appends n entries runs
--         `UPDATE tasks SET event_seq = event_seq + n … RETURNING event_seq` in the same statement
--         and numbers its entries new - n + 1 … new. The row lock serialises appenders of one
--         task, and under READ COMMITTED a writer that waited for the lock re-reads the newest
--         counter (EvalPlanQual), so two writers never take the same numbers and none is skipped
--         (a write that rolls back takes its numbers back with it). A max(seq) + 1 read would not
--         be safe here: two transactions would read the same max.
--   xid   the writing transaction (pg_current_xact_id()). The identity `id` is NOT commit-ordered
--         (a transaction can take id 10, commit after the one that took id 11), so a reader
--         resuming "after id 11" would miss 10. readLog instead returns only rows of transactions
--         older than the snapshot's xmin (every one of them has ended: none can still commit a
--         row there), ordered by (xid, id); any row committed later belongs to a transaction with
--         an xid at or above that xmin, hence after every row already returned.
-- tasks.event_seq  the last seq of the task's log (0: none). Updating it on every append adds
--         a row version per step: fillfactor 80 leaves room on each page for those versions to
--         stay heap-only (HOT, no index writes; event_seq is in no index).
-- Existing history rows become `transition` entries, numbered per task in history order; an
-- `abort` written by lease expiry (no worker, reason "lease expired") is attributed to the system.

CREATE DOMAIN :SCHEMA.actor_kind AS TEXT CHECK (VALUE IN ('user', 'worker', 'system'));

ALTER TABLE :SCHEMA.tasks ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE :SCHEMA.tasks SET (fillfactor = 80);

CREATE TABLE :SCHEMA.events (
  task_id     TEXT COLLATE "C" NOT NULL,
  seq         INTEGER NOT NULL,
  at          BIGINT NOT NULL,
  type        TEXT NOT NULL,
  actor_kind  :SCHEMA.actor_kind NOT NULL,
  actor_id    TEXT NOT NULL,
  data        TEXT,
  xid         xid8 NOT NULL DEFAULT pg_current_xact_id(),
  id          BIGINT GENERATED ALWAYS AS IDENTITY,
  PRIMARY KEY (task_id, seq)
);
-- readLog: (xid, id) order, from a cursor.
CREATE INDEX events_log ON :SCHEMA.events (xid, id);

INSERT INTO :SCHEMA.events (task_id, seq, at, type, actor_kind, actor_id, data)
  SELECT h.task_id, row_number() OVER (PARTITION BY h.task_id ORDER BY h.id), h.at, 'transition',
    CASE WHEN h.worker_id IS NOT NULL THEN 'worker'
         WHEN h.event = 'abort' AND h.detail LIKE '%"reason":"lease expired"%' THEN 'system'
         ELSE 'user' END,
    CASE WHEN h.worker_id IS NOT NULL THEN h.worker_id
         WHEN h.event = 'abort' AND h.detail LIKE '%"reason":"lease expired"%' THEN 'lease-expiry'
         ELSE 'anonymous' END,
    json_build_object('event', h.event, 'from', h.from_status, 'to', h.to_status, 'epoch', h.epoch, 'detail', h.detail::json)::text
  FROM :SCHEMA.history h
  ORDER BY h.id;

UPDATE :SCHEMA.tasks AS t SET event_seq = c.n
  FROM (SELECT task_id, count(*)::int AS n FROM :SCHEMA.history GROUP BY task_id) c
  WHERE t.id = c.task_id;

DROP TABLE :SCHEMA.history;
