-- Stepwise schema for SQLite: one file holds every task of an embedded engine.
--
-- stepwise_tasks     one row per task: the single source of truth for its status, input, output,
--                    error, lease (owner, expiry, fencing epoch), schedule (run_at) and counters.
--                    `no` is an internal integer key; the journal refers to tasks by it because
--                    integer keys make the per-step checkpoint (the hot path) markedly cheaper.
--                    `version` is bumped by every status write (compare-and-set for commands);
--                    `epoch` is bumped by every claim (fencing for workers).
-- stepwise_steps     the journal: one row per step / sleep / event wait, keyed by call position;
--                    `done` is the order in which results were handed to the workflow code
--                    (replay hands them back in the same order).
--                    A waiting task's awaited events are `wait_events`, as |name|name|.
-- stepwise_history   append-only timeline of lifecycle transitions (claim, park, cancel, …).
-- stepwise_signals   events sent to tasks; kept until a waiting step consumes them.
-- stepwise_workflows workflows that workers have registered (name, version), so that a process
--                    without the code (the CLI) can still tell a known workflow from a typo.
-- Times are integer milliseconds since the Unix epoch, passed in by the engine's clock.

CREATE TABLE stepwise_tasks (
  no               INTEGER PRIMARY KEY,
  id               TEXT NOT NULL UNIQUE,
  workflow         TEXT NOT NULL,
  workflow_version TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN
                     ('pending','running','waiting','paused','cancelling','succeeded','failed','cancelled')),
  input            TEXT,
  output           TEXT,
  error            TEXT,
  idempotency_key  TEXT UNIQUE,
  run_at           INTEGER,
  lease_owner      TEXT,
  lease_expires_at INTEGER,
  epoch            INTEGER NOT NULL DEFAULT 0,
  version          INTEGER NOT NULL DEFAULT 1,
  runs             INTEGER NOT NULL DEFAULT 0,
  retries          INTEGER NOT NULL DEFAULT 0,
  pause_requested  INTEGER NOT NULL DEFAULT 0,
  wait             TEXT,
  wait_events      TEXT,
  cancel_reason    TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  finished_at      INTEGER
);
-- Claims: due pending/waiting tasks, and running/cancelling tasks whose lease expired.
CREATE INDEX stepwise_tasks_due ON stepwise_tasks (run_at, id) WHERE status IN ('pending', 'waiting');
CREATE INDEX stepwise_tasks_leased ON stepwise_tasks (lease_expires_at) WHERE status IN ('running', 'cancelling');
-- Listing, newest first, by status or workflow.
CREATE INDEX stepwise_tasks_status ON stepwise_tasks (status, id);
CREATE INDEX stepwise_tasks_workflow ON stepwise_tasks (workflow, id);

CREATE TABLE stepwise_steps (
  task_no     INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  name        TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('step', 'sleep', 'event')),
  status      TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'retrying', 'waiting')),
  output      TEXT,
  error       TEXT,
  attempts    INTEGER NOT NULL DEFAULT 0,
  started_at  INTEGER,
  finished_at INTEGER,
  wake_at     INTEGER,
  epoch       INTEGER NOT NULL,
  done        INTEGER,
  PRIMARY KEY (task_no, seq)
) WITHOUT ROWID;

CREATE TABLE stepwise_history (
  id          INTEGER PRIMARY KEY,
  task_id     TEXT NOT NULL,
  at          INTEGER NOT NULL,
  event       TEXT NOT NULL,
  from_status TEXT,
  to_status   TEXT NOT NULL,
  epoch       INTEGER NOT NULL,
  worker_id   TEXT,
  detail      TEXT
);
CREATE INDEX stepwise_history_task ON stepwise_history (task_id, id);

CREATE TABLE stepwise_signals (
  id              INTEGER PRIMARY KEY,
  task_id         TEXT NOT NULL,
  name            TEXT NOT NULL,
  payload         TEXT,
  idempotency_key TEXT,
  created_at      INTEGER NOT NULL,
  consumed_seq    INTEGER,
  UNIQUE (task_id, idempotency_key)
);
CREATE INDEX stepwise_signals_pending ON stepwise_signals (task_id, name, id) WHERE consumed_seq IS NULL;

CREATE TABLE stepwise_workflows (
  name          TEXT NOT NULL,
  version       TEXT NOT NULL,
  registered_at INTEGER NOT NULL,
  last_seen_at  INTEGER NOT NULL,
  PRIMARY KEY (name, version)
) WITHOUT ROWID;
