--! breaking-change: processes of an earlier version must be stopped before it runs (their
-- statements prepared against the old column types fail with "cached plan must not change result
-- type"), and an earlier version refuses to start on a schema that has it.
-- The journal's kinds and statuses checked by domains instead of table CHECK constraints. The same
-- values are refused, but PostgreSQL prepares a table's CHECK expressions anew for every statement
-- that writes the table, which made the checkpoint of a step (the engine's hot path) about 10 µs
-- dearer, some 5% of a durable commit; a domain's check is prepared once per connection.
-- Changing the column types rewrites `steps` under an exclusive lock: on a large journal, run
-- `stepwise migrate` ahead of the deploy, while the workers are stopped.

CREATE DOMAIN :SCHEMA.step_kind AS TEXT CHECK (VALUE IN ('step', 'sleep', 'event'));
CREATE DOMAIN :SCHEMA.step_status AS TEXT CHECK (VALUE IN ('completed', 'failed', 'retrying', 'waiting'));

ALTER TABLE :SCHEMA.steps
  DROP CONSTRAINT steps_kind_check,
  DROP CONSTRAINT steps_status_check,
  ALTER COLUMN kind TYPE :SCHEMA.step_kind,
  ALTER COLUMN status TYPE :SCHEMA.step_status;
