-- stepwise_alerts  The alerts workers raised (see src/alerts/), one row each, for operators to list
--                  (`engine.alerts()`, the dashboard). A row is written by the worker that delivers
--                  the alert, at most once per subject and quiet period (`dedupe`: the kind, the
--                  subject and the period, so a worker that takes over a delivery cut short by a
--                  crash does not list it twice); rows older than the
--                  engine's `alerts.keep` are deleted by the workers' retention job.

CREATE TABLE stepwise_alerts (
  id        TEXT PRIMARY KEY,
  kind      TEXT NOT NULL,
  subject   TEXT NOT NULL,
  workflow  TEXT,
  task_id   TEXT,
  message   TEXT NOT NULL,
  data      TEXT NOT NULL,
  raised_at INTEGER NOT NULL,
  raised_by TEXT NOT NULL,
  dedupe    TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX stepwise_alerts_raised ON stepwise_alerts (raised_at, id);
CREATE UNIQUE INDEX stepwise_alerts_dedupe ON stepwise_alerts (dedupe);
