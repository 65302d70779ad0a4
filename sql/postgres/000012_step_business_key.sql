-- steps.business_key  for a step with a business key (`ctx.step(name, fn, { key })`):
--                     `v<keyVersion>:<key>`, the key its attempts received (before any `:redo<n>`
--                     suffix); NULL for every other row, whose key is the engine's
--                     `v1:<task>:<name>#<n>`. Adding a nullable column rewrites nothing; rows
--                     written before it (and by processes of an earlier version) are NULL.

ALTER TABLE :SCHEMA.steps ADD COLUMN business_key TEXT;
