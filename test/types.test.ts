// The public types, checked by the compiler (`npm run typecheck` compiles this file): each
// `@ts-expect-error` must meet an error, or the check fails. The runtime part only keeps vitest
// from reporting an empty file.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Engine, workflow, type JsonSafe } from '../src/index.ts';

const summarise = workflow(
  'summarise',
  async (ctx, input: { url: string; words: number }) => {
    const text = await ctx.step('fetch', async () => `page at ${input.url}`);
    const n: string = text;
    const parts = await ctx.step('split', () => ({ parts: [n, n], at: new Date(0).toISOString(), meta: { ok: true as boolean | null } }));
    // @ts-expect-error a Date is not JSON data: it would come back from the journal as a string
    await ctx.step('when', () => new Date());
    // @ts-expect-error neither is a Map, even nested
    await ctx.step('index', () => ({ byWord: new Map<string, number>() }));
    // @ts-expect-error nor a class instance with methods
    await ctx.step('url', () => new URL(input.url));
    // @ts-expect-error nor a function
    await ctx.step('fn', async () => () => 1);
    await ctx.step('nothing', () => undefined);
    return { summary: parts.parts.join(' '), words: input.words };
  },
  { input: z.object({ url: z.string(), words: z.number().default(100) }) },
);

const noSchema = workflow('plain', async (_ctx, input: { n: number }) => input.n * 2);

async function typedStarts(engine: Engine): Promise<void> {
  // The schema's input type: `words` has a default, so it may be left out.
  const handle = await engine.start(summarise, { url: 'https://example.com' });
  const out: { summary: string; words: number } = await handle.result();
  void out;
  // @ts-expect-error url is required by the schema
  await engine.start(summarise, { words: 3 });
  // @ts-expect-error the workflow's input type without a schema
  await engine.start(noSchema, { n: 'one' });
  const doubled: number = await (await engine.start(noSchema, { n: 1 })).result({ timeout: '1s' });
  // @ts-expect-error the result is a number
  const wrong: string = await (await engine.start(noSchema, { n: 1 })).result();
  void doubled;
  void wrong;
  // By name the result is unknown unless the caller says otherwise.
  const byName: unknown = await (await engine.start('plain', { n: 1 })).result();
  const asserted = await engine.result<number>('some-id');
  void byName;
  void asserted;
}

type Check<T extends true> = T;
export type JsonSafeKeepsData = Check<JsonSafe<{ a: string; b: number[]; c?: { d: boolean | null } }> extends { a: string; b: number[]; c?: { d: boolean | null } } ? true : false>;

describe('public types', () => {
  it('are checked by the compiler (this file compiles only if every expected type error occurs)', () => {
    expect(typeof typedStarts).toBe('function');
    expect(summarise.name).toBe('summarise');
  });
});
