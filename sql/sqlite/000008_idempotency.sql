-- stepwise_idempotency  the idempotency record store (engine.idempotency.run, steps with a
--                       business key, the intents of at-most-once steps): one row per key.
--   key              the caller's key; the primary key is the unique index that makes two
--                    concurrent acquirers of one key see each other (one INSERT wins).
--   status           in_progress (an owner is running the operation), completed (`result`
--                    holds its JSON and is returned to every repeat), failed (`error` holds the
--                    last failure; a repeat may run it again).
--   fingerprint      what the first request was (a hash of its parameters), or NULL: a repeat
--                    with another fingerprint is a conflict, not a hit.
--   owner            the token of the acquirer running it (in_progress only).
--   lease_expires_at until when the owner is presumed alive; it renews while it runs. After
--                    that, another acquirer takes the record over (the owner crashed).
--   expires_at       when the record is forgotten (the `ttl` after it completed or failed):
--                    an acquirer treats an expired record as absent; `purge` deletes them.
--   task_id          the task that ran it, if it ran inside one (for the log and `show`).
-- Times are INTEGER milliseconds since the Unix epoch, passed in by the engine's clock.

CREATE TABLE stepwise_idempotency (
  key              TEXT PRIMARY KEY,
  status           TEXT NOT NULL CHECK (status IN ('in_progress', 'completed', 'failed')),
  fingerprint      TEXT,
  owner            TEXT,
  lease_expires_at INTEGER,
  result           TEXT,
  error            TEXT,
  task_id          TEXT,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL,
  expires_at       INTEGER NOT NULL
) WITHOUT ROWID;

-- purge: expired records, oldest first.
CREATE INDEX stepwise_idempotency_expiry ON stepwise_idempotency (expires_at);
