// A worker SIGKILLed in the middle of a model stream (a real process, a real HTTP stream): the task
// resumes on another worker, and the interrupted call is billed — exactly one extra attempt; a page
// following the tokens over HTTP reconnects with Last-Event-ID and gets the retry's reset frame.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Engine, type StreamEvent, type UsageEvent } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { TOKENS } from './support/server.ts';
import { readStream, type SseMessage } from './support/sse.ts';
import { streamEvents } from '../src/ai/index.ts';
import { budgeted, essay } from './fixtures/ai-workflows.ts';
import { tempDir } from './support/engine.ts';
import { spawnCli } from './support/processes.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';

let fake: FakeOpenAI;
const frameText = (seen: SseMessage[]): string =>
  seen
    .filter((m) => m.event === 'stream:delta')
    .map((m) => (JSON.parse(m.data as string) as StreamEvent).delta)
    .join('');
beforeEach(async () => {
  fake = await startFakeOpenAI();
});
afterEach(async () => {
  await fake.close();
});

describe('a crash mid-stream (real processes)', () => {
  it('resumes a SIGKILLed stream on another worker with exactly one extra billed attempt, recorded as interrupted', async () => {
    fake.script([
      { kind: 'text', chunks: ['Durable ', 'agents ', 'survive.'], stallAfter: 2 },
      { kind: 'text', chunks: ['Durable ', 'agents ', 'survive.'], usage: { prompt_tokens: 50, completion_tokens: 6 } },
    ]);
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'ai-crash.db')}`;
    const engine = new Engine({ store: db, workflows: [essay] });
    try {
      const { id } = await engine.start('essay', { topic: 'durability' });
      const args = ['worker', 'test/fixtures/ai-workflows.ts', '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];
      const env = { STEPWISE_TEST_OPENAI_URL: fake.baseURL };
      const a = spawnCli(args, env);
      // Killed while the first request streams (two chunks sent, then the server stalls).
      const first = await fake.waitForRequest(1, 2);
      // A page follows the tokens over HTTP until both chunks are on record.
      const server = createServer(engine, { tokens: TOKENS });
      const seen = await readStream(server, `/api/tasks/${id}/stream`, (s) => frameText(s) === 'Durable agents ');
      const lastId = seen.filter((m) => m.event?.startsWith('stream:')).at(-1)?.id as string;
      a.child.kill('SIGKILL');
      expect((await a.exited).signal).toBe('SIGKILL');
      await first.ended;
      expect(first.finished).toBe(false);

      const b = spawnCli(args, env);
      // The page reconnects with Last-Event-ID: the retried attempt arrives with its reset frame,
      // and nothing it saw before comes again.
      const resumed = await readStream(server, `/api/tasks/${id}/stream`, () => false, { 'last-event-id': lastId });
      const after = resumed.filter((m) => m.event?.startsWith('stream:')).map((m) => JSON.parse(m.data as string) as StreamEvent);
      expect(after[0]).toMatchObject({ type: 'stream:reset', step: 'write', attempt: 2 });
      expect(after.slice(1).every((f) => f.type === 'stream:delta' && f.attempt === 2)).toBe(true);
      expect(after.map((f) => f.delta).join('')).toBe('Durable agents survive.');
      expect(resumed.at(-1)?.event).toBe('end');
      expect(await engine.result(id, { timeout: '30s' })).toEqual({ text: 'Durable agents survive.' });
      // One request per attempt: the killed one and the one that finished.
      expect(fake.requests).toHaveLength(2);
      expect(fake.requests.map((r) => r.headers['idempotency-key'])).toEqual([`v1:${id}:write#1`, `v1:${id}:write#1`]);

      const info = await engine.get(id);
      const usage = info.history.filter((e): e is UsageEvent => e.type === 'usage:attempt').map((e) => e.usage);
      expect(usage.map((u) => `${u.step}#${u.attempt}:${u.outcome}`)).toEqual(['write#1:interrupted', 'write#2:succeeded']);
      // Billed for what it streamed before it died (~4 characters a token).
      expect(usage[0]).toMatchObject({ estimated: true, model: 'gpt-4o-mini', inputTokens: 0, outputTokens: Math.ceil('Durable agents '.length / 4) });
      expect(usage[1]).toMatchObject({ inputTokens: 50, outputTokens: 6, estimated: false });
      expect(info.usage?.steps.write?.attempts).toBe(2);
      expect(info.usage?.total).toMatchObject({ inputTokens: 50, outputTokens: 6 + 4, attempts: 2 });
      // Until the task's frames expire, a reader from the start sees both attempts, the reset between them.
      const left = [];
      for await (const f of streamEvents(engine, id, { follow: false })) left.push(`${f.type === 'stream:reset' ? '|' : f.delta}`);
      expect(left.join('')).toBe('Durable agents |Durable agents survive.');
      b.child.kill('SIGTERM');
      expect((await b.exited).code).toBe(0);
    } finally {
      await engine.close();
    }
  }, 60_000);

  it('keeps the spending of a SIGKILLed worker: the resumed task is refused the call that its budget no longer covers', async () => {
    fake.script([
      { kind: 'text', chunks: ['outline'], usage: { prompt_tokens: 40, completion_tokens: 20 } },
      { kind: 'text', chunks: ['Durable ', 'agents ', 'survive.'], stallAfter: 2 },
    ]);
    const dir = tempDir();
    const db = `sqlite:${join(dir, 'ai-budget.db')}`;
    const engine = new Engine({ store: db, workflows: [budgeted] });
    try {
      const { id } = await engine.start('budgeted-essay');
      const args = ['worker', 'test/fixtures/ai-workflows.ts', '--db', db, '--lease-ms', '1500', '--heartbeat-ms', '250', '--poll-ms', '50'];
      const env = { STEPWISE_TEST_OPENAI_URL: fake.baseURL };
      const a = spawnCli(args, env);
      // 60 tokens spent on the outline; the first write attempt (up to 40 more) fits the budget.
      await fake.waitForRequest(2, 2);
      let seen = '';
      for await (const f of streamEvents(engine, id, { pollMs: 10 })) if ((seen += f.delta) === 'Durable agents ') break;
      a.child.kill('SIGKILL');
      await a.exited;

      // Resumed: 60 + the interrupted attempt's 4 estimated tokens + 40 declared > 100.
      const b = spawnCli(args, env);
      const err = await engine.result(id, { timeout: '30s' }).catch((e: unknown) => e);
      expect((err as { cause?: { code?: string } }).cause?.code).toBe('BUDGET_EXCEEDED');
      expect(fake.requests).toHaveLength(2);
      const info = await engine.get(id);
      expect(info.status === 'failed' && info.error.message).toContain('104 of 100 tokens');
      expect(info.usage?.total).toMatchObject({ totalTokens: 64, attempts: 2 });
      b.child.kill('SIGTERM');
      await b.exited;
    } finally {
      await engine.close();
    }
  }, 60_000);
});
