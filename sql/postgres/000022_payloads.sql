-- blobs       The payload store: values above the engine's threshold, stored once under the hash
--             of their content (see src/payloads/). `size` is the content's length, `stored` the
--             bytes kept (compressed, and encrypted with a codec); `data` is NULL when an external
--             backend (a directory, S3) keeps the bytes, under `location` (a key chosen by the
--             write that inserted the row: a blob collected and stored again gets a new one, so
--             collection never deletes the bytes of a newer row). `touched_at` is when a write last stored
--             or reused it: a write that reuses a blob updates it under the row's lock, and
--             collection deletes only blobs untouched for its grace period, rechecked under that
--             lock, so a blob reused while the last task holding it is deleted is never lost.
-- task_blobs  Which tasks hold which blobs (every node of a value's tree). A blob no task holds,
--             untouched for the grace period, is collected; a task's rows go with the task.

CREATE TABLE :SCHEMA.blobs (
  hash       TEXT COLLATE "C" PRIMARY KEY,
  size       BIGINT NOT NULL,
  stored     BIGINT NOT NULL,
  data       BYTEA,
  location   TEXT,
  touched_at BIGINT NOT NULL
);
CREATE TABLE :SCHEMA.task_blobs (
  task_id TEXT COLLATE "C" NOT NULL,
  hash    TEXT COLLATE "C" NOT NULL,
  PRIMARY KEY (task_id, hash)
);
CREATE INDEX task_blobs_hash ON :SCHEMA.task_blobs (hash);
