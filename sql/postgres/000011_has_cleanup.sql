-- tasks.has_cleanup  true when the last run of the task ended, unfinished, with cleanup registered:
--                    `ctx.onCancel` handlers, or completed steps with a compensation. A cancel of
--                    such a task while it is pending, waiting or paused goes through `cancelling`,
--                    and a failure by the dwell scanner makes it due, so that a worker replays it
--                    and runs that cleanup; without it both are immediate. A constant default
--                    rewrites nothing.

ALTER TABLE :SCHEMA.tasks ADD COLUMN has_cleanup BOOLEAN NOT NULL DEFAULT FALSE;

-- tasks.redo  JSON object: the steps a retry runs again because their compensation undid them,
--             each with how many retries did so (`{"book":1}`), or NULL. Such a step's idempotency
--             key (and its compensation's) ends `:redo<n>`, so that an API that deduplicates does
--             not hand back the effect that was undone.

ALTER TABLE :SCHEMA.tasks ADD COLUMN redo TEXT;
