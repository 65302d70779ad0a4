-- Which running workers serve which workflow versions, for `explain` and `stepwise workers`.
--
-- stepwise_workers_served  one row per (worker, workflow, version) a running worker claims tasks
--                          of: its own version and the versions it lists in `compatibleVersions`.
--                          A worker writes its rows when it starts, refreshes `last_seen_at` every
--                          30 s while it runs and deletes them when it stops; a worker that died
--                          keeps its rows until they are older than a day (any worker's refresh
--                          deletes them). A version is served while some row of it was seen within
--                          three refresh periods.

CREATE TABLE stepwise_workers_served (
  worker_id    TEXT NOT NULL,
  name         TEXT NOT NULL,
  version      TEXT NOT NULL,
  started_at   INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  PRIMARY KEY (worker_id, name, version)
);
CREATE INDEX stepwise_workers_served_name ON stepwise_workers_served (name, last_seen_at);
