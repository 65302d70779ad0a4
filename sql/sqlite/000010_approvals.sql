-- stepwise_approvals  one row per approval a task asked for (`ctx.approval`): who may decide
--                     (`approvers`, a JSON array of names; escalation adds names), how many must
--                     approve (`quorum`), what they review (`payload`, JSON), the timeout policy
--                     (`policy`, JSON, see src/approvals/policy.ts), the current `deadline` and
--                     `remind_at`, the escalation `level` (1 first), the decisions made (JSON array)
--                     and, once decided, the `outcome` handed to the workflow (JSON).
--                     `call_key` names the call that asked (its journal step id and the task's retry
--                     count), unique per task, so that a run resumed after a crash finds the
--                     approval it created instead of asking again. `version` is bumped by every
--                     update (compare-and-set: a decision and a timeout cannot both win).
-- The audit trail is in the task's event log (`approval:*` entries), written in the same
-- transaction as each change of the row.

CREATE TABLE stepwise_approvals (
  id          TEXT PRIMARY KEY,
  task_id     TEXT NOT NULL,
  workflow    TEXT NOT NULL,
  name        TEXT NOT NULL,
  call_key    TEXT NOT NULL,
  status      TEXT NOT NULL CHECK (status = 'pending' OR status = 'approved' OR status = 'rejected' OR status = 'expired' OR status = 'escalated'),
  approvers   TEXT NOT NULL,
  quorum      INTEGER NOT NULL,
  payload     TEXT,
  policy      TEXT NOT NULL,
  deadline    INTEGER,
  remind_at   INTEGER,
  level       INTEGER NOT NULL,
  decisions   TEXT NOT NULL,
  outcome     TEXT,
  version     INTEGER NOT NULL,
  created_at  INTEGER NOT NULL,
  decided_at  INTEGER,
  UNIQUE (task_id, call_key)
);
-- A reviewer's queue: open approvals, oldest first.
CREATE INDEX stepwise_approvals_open ON stepwise_approvals (created_at, id) WHERE status IN ('pending', 'escalated');
CREATE INDEX stepwise_approvals_status ON stepwise_approvals (status, created_at);
