import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RepairableError, validateOutput, workflow } from '../src/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';
import { chatCompletion, fakeHttp } from './support/fake-http.ts';

const Summary = z.object({ title: z.string().min(3), bullets: z.array(z.string()).min(2) });

describe('repair retries', () => {
  it('re-prompts the model with the validation error: the next attempt gets lastError and lastOutput, on a repair budget apart from retries', async () => {
    const server = await fakeHttp([
      { status: 200, body: chatCompletion(JSON.stringify({ title: 'AI', bullets: ['one'] })) },
      { status: 200, body: chatCompletion(JSON.stringify({ title: 'AI agents', bullets: ['one', 'two'] })) },
    ]);
    const ai = new OpenAI({ apiKey: 'k', baseURL: `${server.url}/v1`, maxRetries: 0 });
    const seen: Array<{ attempt: number; lastOutput: unknown; code: string | undefined }> = [];
    const wf = workflow('summarise', async (ctx) =>
      ctx.step(
        'summary',
        async ({ attempt, lastError, lastOutput, signal }) => {
          seen.push({ attempt, lastOutput, code: (lastError as { code?: string } | undefined)?.code });
          const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Summarise as JSON {title, bullets}' }];
          if (lastError) {
            messages.push({ role: 'assistant', content: JSON.stringify(lastOutput) });
            messages.push({ role: 'user', content: `That was invalid: ${lastError.message}. Fix it.` });
          }
          const r = await ai.chat.completions.create({ model: 'gpt-test', messages }, { signal });
          return JSON.parse(r.choices[0]?.message.content ?? 'null') as unknown;
        },
        { output: Summary, repair: { maxAttempts: 2 }, retry: 1 },
      ),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('summarise');
    expect(await engine.result(id)).toEqual({ title: 'AI agents', bullets: ['one', 'two'] });
    expect(seen).toEqual([
      { attempt: 1, lastOutput: undefined, code: undefined },
      { attempt: 2, lastOutput: { title: 'AI', bullets: ['one'] }, code: 'OUTPUT_INVALID' },
    ]);
    const second = server.requests[1]?.body as { messages: Array<{ content: string }> };
    expect(second.messages.at(-1)?.content).toMatch(/That was invalid: The output of step "summary" does not match its schema: title: .*; bullets: /);
    const retry = (await engine.get(id)).history.find((e) => e.type === 'step:retrying');
    expect(retry?.type === 'step:retrying' && retry.step.error).toMatchObject({
      code: 'OUTPUT_INVALID',
      class: { kind: 'repair', repairsUsed: 1 },
      data: { issues: [{ path: ['title'] }, { path: ['bullets'] }] },
    });
  });

  it('fails a still-invalid output after the repair budget with the validation issues attached', async () => {
    let attempts = 0;
    const wf = workflow('never-valid', async (ctx) =>
      ctx.step('extract', () => (attempts++, { title: 'x', bullets: [] }), { output: Summary, repair: 2, retry: { maxAttempts: 5, initialDelay: 1 } }),
    );
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('never-valid');
    await waitForStatus(engine, id, 'failed');
    // Three attempts: the first and two repairs; retries (for transient errors) were not used.
    expect(attempts).toBe(3);
    const info = await engine.get(id);
    expect(info.steps[0]).toMatchObject({ status: 'failed', attempts: 3, error: { code: 'OUTPUT_INVALID', data: { output: { title: 'x', bullets: [] } } } });
    const issues = info.steps[0]?.error?.data?.issues as Array<{ path: string[]; message: string }>;
    expect(issues.map((i) => i.path.join('.'))).toEqual(['title', 'bullets']);
    expect(info.status === 'failed' && info.error.cause?.code).toBe('OUTPUT_INVALID');
  });

  it('a RepairableError thrown by step code uses the repair budget; without one it fails the step at once', async () => {
    const calls = { repaired: 0, unbudgeted: 0 };
    const wf = workflow('business', async (ctx) => {
      const total = await ctx.step(
        'invoice',
        ({ lastOutput }) => {
          calls.repaired++;
          const draft = lastOutput === undefined ? { total: -5 } : { total: Math.abs((lastOutput as { total: number }).total) };
          if (draft.total < 0) throw new RepairableError('total must not be negative', { output: draft });
          return draft.total;
        },
        { repair: 1 },
      );
      await ctx.step(
        'strict',
        () => {
          calls.unbudgeted++;
          throw new RepairableError('no budget for this one');
        },
        { retry: 4, onExhausted: 'skip', fallback: null },
      );
      return total;
    });
    const engine = makeEngine({ workflows: [wf] });
    await startWorker(engine);
    const { id } = await engine.start('business');
    expect(await engine.result(id)).toBe(5);
    expect(calls).toEqual({ repaired: 2, unbudgeted: 1 });
  });

  it('validateOutput returns the parsed value (transforms applied) or throws OUTPUT_INVALID with the issues', async () => {
    const Num = z.string().transform((s) => Number(s));
    await expect(validateOutput(Num, '42', 's')).resolves.toBe(42);
    await expect(validateOutput(Summary, { title: 1 }, 'draft')).rejects.toMatchObject({ code: 'OUTPUT_INVALID', stepName: 'draft', output: { title: 1 } });
    await expect(validateOutput({} as never, 1, 'x')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
