-- stepwise_schedules  one row per schedule (`engine.schedules.create`, or a workflow's `schedule`
--                     option): its definition, and where its ticks stand. `next_at` is the next
--                     tick to fire (ms); a process fires it by moving `next_at` forward with a
--                     compare-and-set (`WHERE next_at = <the tick it read>`), after starting the
--                     tick's task under an idempotency key that names the schedule and the tick,
--                     so each tick starts one task however many processes race for it, and a
--                     fired tick is never fired again (even once its task was deleted).
-- overlap             skip | buffer | allow | cancel: what a tick does while the last one's task runs.
-- catchup_ms          how late a missed tick may still fire (ticks older are skipped).
-- buffered_at         the tick held back by `overlap: 'buffer'` until the running task ends.
-- source              'api' (created by a call) or 'workflow' (declared with a workflow; kept in
--                     step with the code at worker start).

CREATE TABLE stepwise_schedules (
  id TEXT PRIMARY KEY,
  workflow TEXT NOT NULL,
  cron TEXT NOT NULL,
  timezone TEXT,
  input TEXT,
  overlap TEXT NOT NULL CHECK (overlap IN ('skip', 'buffer', 'allow', 'cancel')),
  catchup_ms INTEGER NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  next_at INTEGER,
  last_at INTEGER,
  last_task_id TEXT,
  buffered_at INTEGER,
  skipped INTEGER NOT NULL DEFAULT 0,
  source TEXT NOT NULL CHECK (source IN ('api', 'workflow')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);

CREATE INDEX stepwise_schedules_due ON stepwise_schedules (next_at) WHERE paused = 0;
