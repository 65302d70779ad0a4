-- stepwise_tasks.title          a short text naming the task for people (a start option `title`,
--                               or the workflow's `title(input)`), shown in lists; NULL: none.
-- stepwise_tasks.debounce_key   a debounced start's key (`engine.start(…, { debounce: { key } })`).
--                               While its task has not been claimed yet (`runs = 0`, pending or
--                               paused), a start of the same workflow and key replaces its input
--                               and moves its due time instead of creating a task: the unique
--                               index below holds one such task per workflow and key, and a
--                               claim (which bumps `runs`) takes the task out of it, so the next
--                               start after the claim creates a new task.
-- stepwise_tasks.singleton_key  a singleton start's key (`engine.start(…, { singleton })`): at most
--                               one live (not ended) task per workflow and key; the transition to
--                               an end status frees the key, with no write of its own.
-- Adding nullable columns rewrites nothing; tasks of earlier versions have none of them.

ALTER TABLE stepwise_tasks ADD COLUMN title TEXT;
ALTER TABLE stepwise_tasks ADD COLUMN debounce_key TEXT;
ALTER TABLE stepwise_tasks ADD COLUMN singleton_key TEXT;
CREATE UNIQUE INDEX stepwise_tasks_debounce ON stepwise_tasks (workflow, debounce_key)
  WHERE debounce_key IS NOT NULL AND runs = 0 AND status IN ('pending', 'paused');
CREATE UNIQUE INDEX stepwise_tasks_singleton ON stepwise_tasks (workflow, singleton_key)
  WHERE singleton_key IS NOT NULL AND status IN ('pending', 'running', 'waiting', 'paused', 'cancelling');
