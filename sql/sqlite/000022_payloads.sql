-- stepwise_blobs       The payload store: values above the engine's threshold, stored once under
--                      the hash of their content (see src/payloads/). `size` is the content's
--                      length, `stored` the bytes kept (compressed, and encrypted with a codec);
--                      `data` is NULL when an external backend (a directory, S3) keeps the bytes,
--                      under `location` (a key chosen by the write that inserted the row: a blob
--                      collected and stored again gets a new one, so collection never deletes the
--                      bytes of a newer row).
--                      `touched_at` is when a write last stored or reused it: collection spares a
--                      blob touched within its grace period, so a write that reuses one while a
--                      task that held it is deleted cannot lose it.
-- stepwise_task_blobs  Which tasks hold which blobs (every node of a value's tree). A blob no task
--                      holds, untouched for the grace period, is collected; a task's rows go with it.

CREATE TABLE stepwise_blobs (
  hash       TEXT PRIMARY KEY,
  size       INTEGER NOT NULL,
  stored     INTEGER NOT NULL,
  data       BLOB,
  location   TEXT,
  touched_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE stepwise_task_blobs (
  task_id TEXT NOT NULL,
  hash    TEXT NOT NULL,
  PRIMARY KEY (task_id, hash)
) WITHOUT ROWID;
CREATE INDEX stepwise_task_blobs_hash ON stepwise_task_blobs (hash);
