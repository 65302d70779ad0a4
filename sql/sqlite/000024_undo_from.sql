-- stepwise_tasks.undo_from  A re-run that undoes first (`retry(id, { fromStep, compensate: true })`)
--                           is pending or running: the journal position of `fromStep`. The run that
--                           claims the task replays its code, runs the compensations of the completed
--                           steps from that position on, then forgets them and hands the task back
--                           to run from there. NULL otherwise.

ALTER TABLE stepwise_tasks ADD COLUMN undo_from INTEGER;
