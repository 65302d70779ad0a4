-- stepwise_steps.business_key  for a step with a business key (`ctx.step(name, fn, { key })`):
--                              `v<keyVersion>:<key>`, the key its attempts received (before any
--                              `:redo<n>` suffix); NULL for every other row, whose key is the
--                              engine's `v1:<task>:<name>#<n>`. Rows written before this column
--                              existed are NULL.

ALTER TABLE stepwise_steps ADD COLUMN business_key TEXT;
