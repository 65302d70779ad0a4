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

-- rate_draw_now  the common case of a draw in one round trip: under the limit's and key's advisory
--                lock, prunes, sums the window and appends the draw at `now` if it has room (and
--                no draw was placed after `now`), returning its id; NULL otherwise (the caller then
--                places it in a transaction of its own: store-sql/rate-window.ts). Each statement of
--                this VOLATILE function takes a fresh snapshot under READ COMMITTED, so the sums see
--                every draw committed before the lock was granted.
CREATE FUNCTION :SCHEMA.rate_draw_now(p_lock TEXT, p_name TEXT, p_key TEXT, p_since BIGINT, p_now BIGINT, p_requests BIGINT, p_tokens BIGINT, p_take_requests INTEGER, p_take_tokens BIGINT)
RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  used_requests BIGINT;
  used_tokens BIGINT;
  last_at BIGINT;
  new_id BIGINT;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p_lock, 0));
  DELETE FROM :SCHEMA.rate_draws WHERE name = p_name AND key = p_key AND at <= p_since;
  SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(tokens), 0), MAX(at) INTO used_requests, used_tokens, last_at
    FROM :SCHEMA.rate_draws WHERE name = p_name AND key = p_key AND at > p_since;
  IF (last_at IS NULL OR last_at <= p_now)
     AND (p_requests IS NULL OR used_requests + p_take_requests <= p_requests)
     AND (p_tokens IS NULL OR used_tokens + p_take_tokens <= p_tokens) THEN
    INSERT INTO :SCHEMA.rate_draws (name, key, at, requests, tokens) VALUES (p_name, p_key, p_now, p_take_requests, p_take_tokens) RETURNING id INTO new_id;
    RETURN new_id;
  END IF;
  RETURN NULL;
END
$$;
