-- The journal's CHECK constraints written as comparisons. SQLite evaluates `x IN ('a', 'b', …)`
-- in a CHECK by building a small temporary table on every write, which made the checkpoint of a
-- step (the engine's hot path) about 10% dearer than the same row without it; `x = 'a' OR …`
-- checks the same thing without that cost. SQLite cannot alter a constraint, so the table is
-- rebuilt (same columns, same rows). On a large file the copy holds the write lock while it runs
-- and needs free disk space for a second copy of the journal until the old one is dropped.

CREATE TABLE stepwise_steps_rebuilt (
  task_no     INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  name        TEXT NOT NULL,
  kind        TEXT NOT NULL CHECK (kind = 'step' OR kind = 'sleep' OR kind = 'event'),
  status      TEXT NOT NULL CHECK (status = 'completed' OR status = 'failed' OR status = 'retrying' OR status = 'waiting'),
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

INSERT INTO stepwise_steps_rebuilt (task_no, seq, name, kind, status, output, error, attempts, started_at, finished_at, wake_at, epoch, done)
  SELECT task_no, seq, name, kind, status, output, error, attempts, started_at, finished_at, wake_at, epoch, done FROM stepwise_steps;

DROP TABLE stepwise_steps;
ALTER TABLE stepwise_steps_rebuilt RENAME TO stepwise_steps;
