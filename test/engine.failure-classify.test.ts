import { APICallError } from 'ai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { NonRetryableError, failedAttempts, workflow, type TaskInfo } from '../src/index.ts';
import { taskDetail } from '../src/cli/format.ts';
import { ManualClock } from '../src/testing/index.ts';
import { eventually, makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { chatCompletion, fakeHttp, openaiError } from './support/fake-http.ts';

/** The openai client against the fake server, with its own retries off: the engine retries. */
function client(url: string): OpenAI {
  return new OpenAI({ apiKey: 'test-key', baseURL: `${url}/v1`, maxRetries: 0 });
}

async function ask(ai: OpenAI, signal: AbortSignal): Promise<string> {
  const r = await ai.chat.completions.create({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] }, { signal });
  return r.choices[0]?.message.content ?? '';
}

function stepOf(info: TaskInfo, name: string) {
  return info.steps.find((s) => s.name === name);
}

/** Moves the manual clock on a millisecond, then 100 ms at a time, until `done` (the timer it waits for may be set late). */
async function advanceUntil(clock: ManualClock, done: () => boolean): Promise<void> {
  await clock.advance(1);
  for (let i = 0; i < 100 && !done(); i++) {
    await new Promise((r) => setTimeout(r, 20));
    if (!done()) await clock.advance(100);
  }
  expect(done()).toBe(true);
}

describe('error classification', () => {
  it("waits the openai client's 429 Retry-After (1 s, through the clock) before the next attempt", async () => {
    const server = await fakeHttp([
      { status: 429, headers: { 'retry-after': '1' }, body: openaiError('Rate limit reached', 'requests', 'rate_limit_exceeded') },
      { status: 200, body: chatCompletion('hello') },
    ]);
    const clock = new ManualClock();
    const ai = client(server.url);
    const wf = workflow('llm-429', async (ctx) => ctx.step('ask', ({ signal }) => ask(ai, signal)));
    const engine = makeEngine({ workflows: [wf], clock });
    await startWorker(engine);
    const failedAt = clock.now();
    const { id } = await engine.start('llm-429');
    await eventually(async () => stepOf(await engine.get(id), 'ask')?.status === 'retrying', 10_000, 'the 429 recorded');
    const retrying = stepOf(await engine.get(id), 'ask');
    expect(retrying?.wakeAt).toBe(failedAt + 1000);
    expect(retrying?.error?.class).toMatchObject({ kind: 'transient', retryable: true, status: 429, retryAfterMs: 1000 });
    await clock.advance(999);
    expect(server.requests).toHaveLength(1);
    await advanceUntil(clock, () => server.requests.length === 2);
    expect(await engine.result(id)).toBe('hello');
    expect(server.requests).toHaveLength(2);
  });

  it('sends a 400 context_length_exceeded from the openai client once and fails the task with the classified error', async () => {
    const server = await fakeHttp([{ status: 400, body: openaiError("This model's maximum context length is 8192 tokens", 'invalid_request_error', 'context_length_exceeded') }]);
    const ai = client(server.url);
    const wf = workflow('llm-400', async (ctx) => ctx.step('ask', ({ signal }) => ask(ai, signal), { retry: { maxAttempts: 5, initialDelay: 1 } }));
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('llm-400');
    await waitForStatus(engine, id, 'failed');
    expect(server.requests).toHaveLength(1);
    const info = await engine.get(id);
    const step = stepOf(info, 'ask');
    expect(step).toMatchObject({ status: 'failed', attempts: 1 });
    expect(step?.error).toMatchObject({ code: 'context_length_exceeded', retryable: false, class: { kind: 'permanent', status: 400, reason: 'http 400' } });
    expect(typeof step?.error?.stack).toBe('string');
    // The task's error keeps the class on its cause (the step's error).
    expect(info.status === 'failed' && info.error.cause?.class?.kind).toBe('permanent');
  });

  it('sends an AI SDK APICallError with isRetryable: false once, and retries one with isRetryable: true honouring its Retry-After', async () => {
    const clock = new ManualClock();
    const calls = { fatal: 0, flaky: 0 };
    const wf = workflow('ai-sdk', async (ctx) => {
      const flaky = await ctx.step(
        'flaky',
        ({ attempt }) => {
          calls.flaky++;
          if (attempt === 1) {
            throw new APICallError({ message: 'Overloaded', url: 'http://x/v1', requestBodyValues: {}, statusCode: 529, responseHeaders: { 'retry-after': '2' }, isRetryable: true });
          }
          return 'ok';
        },
        { retry: { maxAttempts: 3, initialDelay: 1 } },
      );
      await ctx.step(
        'fatal',
        () => {
          calls.fatal++;
          throw new APICallError({ message: 'Invalid prompt', url: 'http://x/v1', requestBodyValues: {}, statusCode: 400, isRetryable: false });
        },
        { retry: 5 },
      );
      return flaky;
    });
    const engine = makeEngine({ workflows: [wf], clock });
    // A lease longer than the clock's moves: the retry waits in-process (2 s is within parkAfterMs),
    // and a run still going when the clock jumps past its lease would give the lease up.
    await startWorker(engine, { leaseMs: 60_000 });
    const { id } = await engine.start('ai-sdk');
    await eventually(async () => stepOf(await engine.get(id), 'flaky')?.status === 'retrying', 10_000, 'the overload recorded');
    expect(stepOf(await engine.get(id), 'flaky')?.error?.class).toMatchObject({ kind: 'transient', retryAfterMs: 2000, status: 529 });
    await clock.advance(1999);
    expect(calls.flaky).toBe(1);
    // The backoff's timer is set once the retry is recorded, maybe after the clock moved above:
    // move it on until the retry has run (never before its Retry-After, as checked just above).
    await advanceUntil(clock, () => calls.flaky === 2);
    await waitForStatus(engine, id, 'failed');
    expect(calls).toEqual({ flaky: 2, fatal: 1 });
    expect(stepOf(await engine.get(id), 'fatal')?.error?.class).toMatchObject({ kind: 'permanent', reason: 'isRetryable: false (http 400)' });
  });

  it('retries fetch network failures and 503 responses, and does not retry a 404 thrown as a Response', async () => {
    const server = await fakeHttp([
      { status: 503, body: { error: 'busy' } },
      { status: 200, body: { ok: true } },
    ]);
    const up = await fakeHttp([{ status: 200, body: {} }]);
    const missing = await fakeHttp([{ status: 404, body: { error: 'no such page' } }]);
    const closed = await fakeHttp([{ status: 200, body: {} }]);
    await closed.close(); // its port now refuses connections
    let refusedCalls = 0;
    let missingCalls = 0;
    const wf = workflow('fetches', async (ctx) => {
      const refused = await ctx.step(
        'refused',
        async ({ attempt }) => {
          refusedCalls++;
          const res = await fetch(attempt === 1 ? closed.url : up.url);
          if (!res.ok) throw res;
          return res.status;
        },
        { retry: { maxAttempts: 4, initialDelay: 1, maxDelay: 2 } },
      );
      const busy = await ctx.step(
        'busy',
        async () => {
          const res = await fetch(server.url);
          if (!res.ok) throw res;
          return (await res.json()) as { ok: boolean };
        },
        { retry: { maxAttempts: 4, initialDelay: 1, maxDelay: 2 } },
      );
      const page = await ctx.step(
        'page',
        async () => {
          missingCalls++;
          const res = await fetch(missing.url);
          if (!res.ok) throw Object.assign(new Error(`GET ${missing.url}: ${res.status}`), { response: res });
          return 'found';
        },
        { retry: { maxAttempts: 4, initialDelay: 1 }, onExhausted: 'skip', fallback: 'missing' },
      );
      return { refused, busy, page };
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('fetches');
    // The 503 came from a thrown Response object (not an Error): classified from its status.
    expect(await engine.result(id)).toEqual({ refused: 200, busy: { ok: true }, page: 'missing' });
    expect(refusedCalls).toBe(2);
    expect(missingCalls).toBe(1);
    const attempts = failedAttempts((await engine.get(id)).history);
    expect(attempts.map((a) => `${a.step}#${a.attempt}:${a.error.class?.kind}:${a.error.class?.reason}:${a.outcome}`)).toEqual([
      'refused#1:transient:network ECONNREFUSED:retried',
      'busy#1:transient:http 503:retried',
      'page#1:permanent:http 404:skipped',
    ]);
  });

  it("lets a step's classify hook override the default both ways; NonRetryableError stays final", async () => {
    const calls: Record<string, number> = {};
    const count = (k: string): number => (calls[k] = (calls[k] ?? 0) + 1);
    const wf = workflow('hooked', async (ctx) => {
      // A 400 that this API uses for a transient condition: retried.
      const a = await ctx.step(
        'lock',
        () => {
          if (count('lock') < 3) throw Object.assign(new Error('resource locked'), { status: 400, code: 'LOCKED' });
          return 'unlocked';
        },
        { retry: { maxAttempts: 5, initialDelay: 1, maxDelay: 1 }, classify: (e) => ((e as { code?: string }).code === 'LOCKED' ? 'transient' : undefined) },
      );
      // An unknown error the hook calls permanent: sent once.
      const b = await ctx.step(
        'quota',
        () => {
          count('quota');
          throw Object.assign(new Error('monthly quota used up'), { code: 'QUOTA' });
        },
        { retry: 5, classify: (e) => ((e as { code?: string }).code === 'QUOTA' ? 'permanent' : undefined), onExhausted: 'skip', fallback: null },
      );
      const c = await ctx.step(
        'declined',
        () => {
          count('declined');
          throw new NonRetryableError('card declined');
        },
        { retry: 5, classify: () => 'transient', onExhausted: 'skip', fallback: 'no-card' },
      );
      return [a, b, c];
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('hooked');
    expect(await engine.result(id)).toEqual(['unlocked', null, 'no-card']);
    expect(calls).toEqual({ lock: 3, quota: 1, declined: 1 });
    const info = await engine.get(id);
    expect(stepOf(info, 'quota')?.error?.class).toMatchObject({ kind: 'permanent', reason: 'classify hook' });
  });

  it('show prints each failed attempt with its class and what followed', async () => {
    const wf = workflow('shown', async (ctx) =>
      ctx.step(
        'call',
        ({ attempt }) => {
          if (attempt === 1) throw Object.assign(new Error('Service Unavailable'), { status: 503 });
          throw Object.assign(new Error('Bad Request: missing field "q"'), { status: 400 });
        },
        { retry: { maxAttempts: 3, initialDelay: 1 } },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('shown');
    await waitForStatus(engine, id, 'failed');
    // eslint-disable-next-line no-control-regex
    const text = taskDetail(await engine.get(id)).replace(/\x1b\[[0-9;]*m/g, '');
    expect(text).toMatch(
      /Failed attempts\n {2}call attempt 1 {2}\[transient http 503\] Service Unavailable → retry at .+\n {2}call attempt 2 {2}\[permanent http 400\] Bad Request: missing field "q" → failed/,
    );
  });
});
