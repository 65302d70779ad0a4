-- Stepwise schema for PostgreSQL: many workers on many machines share these tables.
-- `:SCHEMA` is replaced by the migrator with the quoted schema name (default "stepwise"); the
-- migrator also creates the schema and :SCHEMA.migrations (id, name, breaking, applied_at).
--
-- tasks      one row per task: the single source of truth for its status, input, output, error,
--            lease (owner, expiry, fencing epoch), schedule (run_at) and counters.
--            `version` is bumped by every status write (compare-and-set for commands);
--            `epoch` is bumped by every claim (fencing for workers).
-- steps      the journal: one row per step / sleep / event wait, keyed by call position; `done`
--            is the order in which results were handed to the workflow code (replay keeps it).
--            A waiting task's awaited events are `wait_events`, as |name|name|.
-- history    append-only timeline of lifecycle transitions (claim, park, cancel, …).
-- signals    events sent to tasks; kept until a waiting step consumes them.
-- workflows  workflows that workers have registered (name, version), so that a process without
--            the code (the CLI) can still tell a known workflow from a typo.
--
-- Times are BIGINT milliseconds since the Unix epoch, passed in by the engine's clock (never now()).
-- JSON payloads are TEXT: the store never parses them, and text round-trips byte for byte.
-- Task ids use COLLATE "C" so that `ORDER BY id` and `id < $cursor` compare bytes, as SQLite does
-- (ids are time-ordered base32 strings).
-- No foreign keys: like the SQLite schema, rows of one task are written together by the store,
-- and retention deletes them together.

CREATE TABLE :SCHEMA.tasks (
  id               TEXT COLLATE "C" PRIMARY KEY,
  workflow         TEXT NOT NULL,
  workflow_version TEXT NOT NULL,
  status           TEXT NOT NULL CHECK (status IN
                     ('pending','running','waiting','paused','cancelling','succeeded','failed','cancelled')),
  input            TEXT,
  output           TEXT,
  error            TEXT,
  idempotency_key  TEXT,
  run_at           BIGINT,
  lease_owner      TEXT,
  lease_expires_at BIGINT,
  epoch            INTEGER NOT NULL DEFAULT 0,
  version          INTEGER NOT NULL DEFAULT 1,
  runs             INTEGER NOT NULL DEFAULT 0,
  retries          INTEGER NOT NULL DEFAULT 0,
  pause_requested  BOOLEAN NOT NULL DEFAULT FALSE,
  wait             TEXT,
  wait_events      TEXT,
  cancel_reason    TEXT,
  created_at       BIGINT NOT NULL,
  updated_at       BIGINT NOT NULL,
  finished_at      BIGINT
);
-- Claims: due pending/waiting tasks (oldest first), and running/cancelling tasks whose lease
-- expired. The store writes these status lists as literals so the planner can use the partial indexes.
CREATE INDEX tasks_due ON :SCHEMA.tasks (run_at, id) WHERE status IN ('pending', 'waiting');
CREATE INDEX tasks_leased ON :SCHEMA.tasks (lease_expires_at) WHERE status IN ('running', 'cancelling');
-- Listing, newest first, by status or workflow.
-- Every status change of a task writes a new row version into each index (PostgreSQL cannot update
-- in place when an indexed column changes), so indexes are kept few and partial: keyless tasks are
-- not in the key index, and succeeded tasks (the bulk, listed newest first from the primary key
-- anyway) are not in the status index. Concurrency caps count leased tasks through tasks_leased.
CREATE UNIQUE INDEX tasks_idempotency_key ON :SCHEMA.tasks (idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX tasks_status ON :SCHEMA.tasks (status, id) WHERE status <> 'succeeded';
CREATE INDEX tasks_workflow ON :SCHEMA.tasks (workflow, id);

CREATE TABLE :SCHEMA.steps (
  task_id     TEXT COLLATE "C" NOT NULL,
  seq         INTEGER NOT NULL,
  name        TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('step', 'sleep', 'event')),
  status      TEXT NOT NULL CHECK (status IN ('completed', 'failed', 'retrying', 'waiting')),
  output      TEXT,
  error       TEXT,
  attempts    INTEGER NOT NULL DEFAULT 0,
  started_at  BIGINT,
  finished_at BIGINT,
  wake_at     BIGINT,
  epoch       INTEGER NOT NULL,
  done        INTEGER,
  PRIMARY KEY (task_id, seq)
);

CREATE TABLE :SCHEMA.history (
  id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id     TEXT COLLATE "C" NOT NULL,
  at          BIGINT NOT NULL,
  event       TEXT NOT NULL,
  from_status TEXT,
  to_status   TEXT NOT NULL,
  epoch       INTEGER NOT NULL,
  worker_id   TEXT,
  detail      TEXT
);
CREATE INDEX history_task ON :SCHEMA.history (task_id, id);

CREATE TABLE :SCHEMA.signals (
  id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  task_id         TEXT COLLATE "C" NOT NULL,
  name            TEXT NOT NULL,
  payload         TEXT,
  idempotency_key TEXT,
  created_at      BIGINT NOT NULL,
  consumed_seq    INTEGER,
  UNIQUE (task_id, idempotency_key)
);
CREATE INDEX signals_pending ON :SCHEMA.signals (task_id, name, id) WHERE consumed_seq IS NULL;

CREATE TABLE :SCHEMA.workflows (
  name          TEXT NOT NULL,
  version       TEXT NOT NULL,
  registered_at BIGINT NOT NULL,
  last_seen_at  BIGINT NOT NULL,
  PRIMARY KEY (name, version)
);
