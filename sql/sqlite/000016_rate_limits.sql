-- stepwise_rate_draws  the sliding log of the engine's rate limits (`new Engine({ rateLimits })`):
--                      one row per draw a step made on a limit (`ctx.step(…, { rateLimit })`),
--                      before its call. `name` is the limit, `key` the key it is shared by ('' when
--                      the step gives none), `at` when the call may be made (ms, the engine's
--                      clock; a draw made while the window is full is placed at the moment
--                      capacity returns, and its task parks until then), `requests` and `tokens`
--                      what it takes (the model helpers settle `tokens` to the real usage after
--                      the call). A draw is checked and appended inside one write transaction,
--                      never before a draw already in the log, so that no interval of the limit's
--                      length ever holds more than the limit. Rows older than one window are
--                      pruned by the draws themselves.

CREATE TABLE stepwise_rate_draws (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  key TEXT NOT NULL,
  at INTEGER NOT NULL,
  requests INTEGER NOT NULL,
  tokens INTEGER NOT NULL
);

CREATE INDEX stepwise_rate_draws_window ON stepwise_rate_draws (name, key, at);
