-- rate_draws  the sliding log of the engine's rate limits (`new Engine({ rateLimits })`): one row
--             per draw a step made on a limit (`ctx.step(…, { rateLimit })`), before its call.
--             `name` is the limit, `key` the key it is shared by ('' when the step gives none),
--             `at` when the call may be made (ms, the engine's clock; a draw made while the
--             window is full is placed at the moment capacity returns, and its task parks until
--             then), `requests` and `tokens` what it takes (the model helpers settle `tokens` to
--             the real usage after the call). Draws of one (name, key) serialize on
--             pg_advisory_xact_lock; each is checked and appended in one transaction, never
--             before a draw already in the log, so that no interval of the limit's length ever
--             holds more than the limit. Rows older than one window are pruned by the draws.

CREATE TABLE :SCHEMA.rate_draws (
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name TEXT NOT NULL,
  key TEXT NOT NULL,
  at BIGINT NOT NULL,
  requests INTEGER NOT NULL,
  tokens BIGINT NOT NULL
);

CREATE INDEX rate_draws_window ON :SCHEMA.rate_draws (name, key, at);
