/**
 * @module rate-limits/step-draw
 * Internal: not part of the public API.
 * A step's draw on its rate limit before each attempt (`ctx.step(…, { rateLimit })`). The store
 * places the draw in the limit's sliding log (`store/rate-limits.ts`): at once when the window has
 * room, else at the moment capacity returns. A draw placed later is a reservation: the step waits
 * for it as for a retry's backoff, and the task parks (no worker slot held) with the step's row
 * recording the reservation (status `retrying`, output `{ rateLimit: { name, key, id, at } }`),
 * so the run that resumes it at that time uses it instead of drawing again.
 *
 * The draw is not a journaled call: a step with a recorded result draws nothing on replay, and the
 * code's call order is unchanged. A process that dies after its draw leaves the draw in the log
 * (it counts; never over the limit); its step draws again in the next run.
 */
import type { InvalidArgumentError } from '../errors.ts';
import { decodeJson, encodeError } from '../serialize.ts';
import type { RateDraw, StepRow } from '../store.ts';
import type { RateLimitTicket, StepRateLimit } from '../api/rate-limits.ts';
import type { Run } from '../run/run.ts';
import { journalRow } from '../run/identity.ts';
import { waitFor, type Wait } from '../run/waits.ts';
import type { StepCall } from '../primitives/step-call.ts';
import { resolveStepRate, type RateLimitTable, type StepRate } from './config.ts';

declare module '../run/run.ts' {
  interface RunServices {
    /** The engine's named rate limits; absent or empty: a step naming one fails its task. */
    rateLimits?: RateLimitTable | undefined;
  }
}

const EMPTY: RateLimitTable = new Map();

/** What the step's `rateLimit` option draws; an unknown limit or a bad option fails the run. */
export function stepRateOf(run: Run, stepId: string, option: StepRateLimit): StepRate {
  try {
    return resolveStepRate(run.deps.rateLimits ?? EMPTY, `ctx.step("${stepId}")`, option);
  } catch (e) {
    throw run.fail(e as InvalidArgumentError);
  }
}

/** The reservation a step's recorded row holds (it parked waiting for it), if any. */
export function recordedReservation(row: StepRow | undefined): RateDraw | undefined {
  if (!row || row.kind !== 'step' || row.status !== 'retrying' || !row.output) return undefined;
  const r = (decodeJson(row.output) as { rateLimit?: { id?: unknown; at?: unknown } } | null)?.rateLimit;
  return typeof r?.id === 'number' && typeof r.at === 'number' ? { id: r.id, at: r.at } : undefined;
}

/** The wait for a reservation: the step's row records it, and the task parks until it is due. */
export function reservationWait(run: Run, c: StepCall<unknown>, draw: RateDraw): Wait {
  const rate = c.rate as StepRate;
  return {
    row: journalRow(run, c.seq, c.stepId, 'step', {
      status: 'retrying',
      error: c.lastError ? encodeError(c.lastError) : null,
      output: JSON.stringify({ rateLimit: { name: rate.limit.name, key: rate.key, id: draw.id, at: draw.at } }),
      attempts: c.attempt,
      startedAt: c.firstStart,
      wakeAt: draw.at,
    }),
    wakeAt: draw.at,
    events: [],
    describe: { kind: 'rate-limit', step: c.stepId, limit: rate.limit.name, key: rate.key, until: draw.at },
  };
}

function ticketOf(run: Run, rate: StepRate, draw: RateDraw): RateLimitTicket {
  const store = run.deps.store;
  return Object.freeze({
    name: rate.limit.name,
    key: rate.key,
    drawnAt: draw.at,
    tokens: rate.tokens,
    settle: async (tokens: number): Promise<void> => {
      if (!Number.isFinite(tokens) || tokens < 0) return;
      await store.settleRate(draw.id, Math.round(tokens)).catch(() => undefined);
    },
  });
}

/** How many times a draw that came back too late to use is made again before the call goes anyway. */
const REDRAWS = 3;

/**
 * Before an attempt of a step with a rate limit: sets the attempt's ticket and answers false when
 * it may go now; otherwise waits for its reservation (parking the task if nothing else runs) and
 * answers true: the caller checks again whether the run may go on, then calls this again.
 *
 * A call may start at most `lateMs` after its draw's place, the margin its draw was placed with: a
 * reservation woken later than that (a busy worker, a task resumed late) or a draw whose store call
 * took longer is not used (it still counts) and the step draws again.
 */
export async function drawOrWait(run: Run, c: StepCall<unknown>): Promise<boolean> {
  const rate = c.rate as StepRate;
  const { clock } = run.deps;
  const late = rate.limit.lateMs;
  let draw = c.reserved;
  c.reserved = undefined;
  for (let tries = 0; ; tries++) {
    if (draw && clock.now() > draw.at + late && tries < REDRAWS) draw = undefined;
    if (draw) break;
    draw = await run.deps.store.drawRate({
      name: rate.limit.name,
      key: rate.key,
      requests: rate.limit.requests,
      tokens: rate.limit.tokens,
      perMs: rate.limit.perMs + late,
      takeRequests: rate.requests,
      takeTokens: rate.tokens,
      now: clock.now(),
    });
  }
  if (draw.at <= clock.now()) {
    c.ticket = ticketOf(run, rate, draw);
    return false;
  }
  c.reserved = draw;
  await waitFor(run, reservationWait(run, c, draw), c.activity);
  return true;
}
