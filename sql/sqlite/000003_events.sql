--! breaking-change: processes of an earlier version write `stepwise_history`, which this migration
-- drops; stop them before it runs (an earlier version refuses to start on a schema that has it).
-- The history table becomes a per-task append-only event log.
--
-- stepwise_events  the entries of a task's log stored on their own: transitions, signals, journal
--                  writes that are not a step's result (migration 4 lets a result's journal row
--                  carry its entry). (task_no, seq) numbers a task's entries 1, 2, 3… without gaps;
--                  a write takes the next seqs inside its BEGIN IMMEDIATE transaction (one writer
--                  at a time, so the read and the insert cannot interleave with another writer's).
--                  `id` is the global order for readLog: one writer at a time means rowids are
--                  assigned in commit order. It is an INTEGER PRIMARY KEY (a rowid alias) rather
--                  than the implicit rowid because VACUUM may renumber implicit rowids.
--                  `data` is JSON text in the format of src/log-entries.ts.
-- Existing history rows become `transition` entries, numbered per task in history order; an
-- `abort` written by lease expiry (no worker, reason "lease expired") is attributed to the system.

CREATE TABLE stepwise_events (
  id          INTEGER PRIMARY KEY,
  task_no     INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  at          INTEGER NOT NULL,
  type        TEXT NOT NULL,
  actor_kind  TEXT NOT NULL CHECK (actor_kind = 'user' OR actor_kind = 'worker' OR actor_kind = 'system'),
  actor_id    TEXT NOT NULL,
  data        TEXT,
  UNIQUE (task_no, seq)
);

INSERT INTO stepwise_events (task_no, seq, at, type, actor_kind, actor_id, data)
  SELECT t.no, row_number() OVER (PARTITION BY h.task_id ORDER BY h.id), h.at, 'transition',
    CASE WHEN h.worker_id IS NOT NULL THEN 'worker'
         WHEN h.event = 'abort' AND h.detail IS NOT NULL AND json_valid(h.detail) AND json_extract(h.detail, '$.reason') = 'lease expired' THEN 'system'
         ELSE 'user' END,
    CASE WHEN h.worker_id IS NOT NULL THEN h.worker_id
         WHEN h.event = 'abort' AND h.detail IS NOT NULL AND json_valid(h.detail) AND json_extract(h.detail, '$.reason') = 'lease expired' THEN 'lease-expiry'
         ELSE 'anonymous' END,
    json_object('event', h.event, 'from', h.from_status, 'to', h.to_status, 'epoch', h.epoch,
      'detail', CASE WHEN json_valid(h.detail) THEN json(h.detail) END)
  FROM stepwise_history h JOIN stepwise_tasks t ON t.id = h.task_id
  ORDER BY h.id;

DROP TABLE stepwise_history;
