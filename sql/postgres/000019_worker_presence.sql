-- Which running workers serve which workflow versions, for `explain` and `stepwise workers`.
--
-- workers_served  one row per (worker, workflow, version) a running worker claims tasks of: its
--                 own version and the versions it lists in `compatibleVersions`. A worker writes
--                 its rows when it starts, refreshes `last_seen_at` every 30 s while it runs and
--                 deletes them when it stops; a worker that died keeps its rows until they are
--                 older than a day (any worker's refresh deletes them). A version is served while
--                 some row of it was seen within three refresh periods.
--
-- `workflows` (migration 1) stays the registry of every version ever registered.

CREATE TABLE :SCHEMA.workers_served (
  worker_id    TEXT NOT NULL,
  name         TEXT NOT NULL,
  version      TEXT NOT NULL,
  started_at   BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  PRIMARY KEY (worker_id, name, version)
);
CREATE INDEX workers_served_name ON :SCHEMA.workers_served (name, last_seen_at);
