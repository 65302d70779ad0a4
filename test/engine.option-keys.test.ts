// Unknown option keys are refused with INVALID_ARGUMENT naming them and the known ones, so a typo
// (idempotencykey) never starts a duplicate or changes nothing silently.
import { describe, expect, it } from 'vitest';
import { Engine, isStepwiseError, workflow, type WorkflowContext } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { StepwiseChatTransport, StepwiseClient } from '../src/client/index.ts';
import { makeEngine, startWorker } from './support/engine.ts';

const wf = workflow('w', async () => 1);

async function refused(p: Promise<unknown>): Promise<string> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(isStepwiseError(e, 'INVALID_ARGUMENT')).toBe(true);
  return (e as Error).message;
}

describe('unknown option keys', () => {
  it('engine.start refuses a mistyped idempotencyKey instead of starting a duplicate', async () => {
    const engine = makeEngine({ workflows: [wf] });
    const msg = await refused(engine.start('w', {}, { idempotencykey: 'order-1' } as never));
    expect(msg).toContain('engine.start(): unknown option "idempotencykey" (known: by, idempotencyKey, delay, budget, deadline, title, debounce, singleton, priority, tags, version)');
    expect((await engine.list()).tasks).toHaveLength(0);
    expect(await refused(engine.startMany([{ workflow: 'w', input: 1, idempotencykey: 'x' } as never]))).toContain('startMany(): item 0: unknown option "idempotencykey"');
  });

  it('every command taking an options object names the unknown keys', async () => {
    const engine = makeEngine({ workflows: [wf] });
    const { id } = await engine.start('w', {});
    expect(await refused(engine.list({ statuss: 'pending' } as never))).toContain('engine.list(): unknown option "statuss"');
    expect(await refused(engine.count({ workflows: ['w'] } as never))).toContain('engine.count(): unknown option "workflows"');
    expect(await refused(engine.get(id, { step: false } as never))).toContain('engine.get(): unknown option "step"');
    expect(await refused(engine.result(id, { timout: '1s' } as never))).toContain('engine.result(): unknown option "timout"');
    expect(await refused(engine.cancel(id, { reson: 'x' } as never))).toContain('engine.cancel(): unknown option "reson"');
    expect(await refused(engine.pause(id, { reason: 'x' } as never))).toContain('engine.pause(): unknown option "reason"');
    expect(await refused(engine.resume(id, { x: 1 } as never))).toContain('engine.resume(): unknown option "x"');
    expect(await refused(engine.retry(id, { from: 'a' } as never))).toContain('engine.retry(): unknown option "from" (known: by, fromStep, deadline, compensate)');
    expect(await refused(engine.signal(id, 'go', null, { key: 'k' } as never))).toContain('engine.signal(): unknown option "key"');
    expect(await refused(engine.purge({ olderThan: 0, dryrun: true } as never))).toContain('engine.purge(): unknown option "dryrun" (known: by, olderThan, status, workflow, dryRun, limit)');
    expect(await refused(engine.delete(id, { force: true } as never))).toContain('engine.delete(): unknown option "force" (known: by)');
    expect(await refused(engine.send(id, 'go', null, { key: 'k' } as never))).toContain('engine.send(): unknown option "key" (known: by, idempotencyKey)');
    // Nothing was changed by the refused calls.
    expect((await engine.get(id)).status).toBe('pending');
  });

  it("refuses two versions of one workflow in the engine's list instead of serving only the last", () => {
    const v1 = workflow('article', async () => 1, { version: 1 });
    const v2 = workflow('article', async () => 2, { version: 2 });
    expect(() => makeEngine({ workflows: [v1, v2] })).toThrow(/workflow "article" is listed twice \(versions 1 and 2\).*compatibleVersions: \['1'\]/);
    expect(makeEngine({ workflows: [v1, v1] }).workflows.get('article')).toBe(v1); // the same definition twice is one
  });
});

describe('unknown option keys of the engine, its workers, streams, server and client', () => {
  const sync = (fn: () => unknown): Promise<unknown> => Promise.resolve().then(fn);

  it('new Engine() refuses a mistyped option, store option or limit, naming the known ones', async () => {
    expect(await refused(sync(() => new Engine({ stroe: 'sqlite::memory:' } as never)))).toContain('new Engine(): unknown option "stroe" (known: store, workflows,');
    expect(await refused(sync(() => new Engine({ store: 'sqlite::memory:', postgres: { shema: 'x' } } as never)))).toContain(
      'new Engine({ postgres }): unknown option "shema" (known: schema, poolSize, connectTimeoutMs, statementTimeoutMs)',
    );
    expect(await refused(sync(() => new Engine({ store: 'sqlite::memory:', sqlite: { synchronus: 'normal' } } as never)))).toContain('new Engine({ sqlite }): unknown option "synchronus"');
    expect(await refused(sync(() => new Engine({ store: 'sqlite::memory:', limits: { inputByte: 10 } } as never)))).toContain(
      'new Engine({ limits }): unknown option "inputByte" (known: inputBytes, outputBytes, payloadBytes, childDepth)',
    );
  });

  it('engine.worker() and engine.events() refuse a mistyped option', async () => {
    const engine = makeEngine({ workflows: [wf] });
    expect(await refused(sync(() => engine.worker({ pollIntervalMS: 10 } as never)))).toContain('engine.worker(): unknown option "pollIntervalMS" (known: concurrency,');
    expect(await refused(sync(() => engine.events({ taskID: 'x' } as never)))).toContain('engine.events(): unknown option "taskID"');
  });

  it('createServer() refuses a mistyped option', async () => {
    const engine = makeEngine({ workflows: [wf] });
    const tokens = [{ name: 'ops', role: 'admin' as const, token: 'secret-token-123' }];
    expect(await refused(sync(() => createServer(engine, { tokens, dashbaord: false } as never)))).toContain('createServer(): unknown option "dashbaord"');
  });

  it('the HTTP client and the chat transport refuse a mistyped option with a TypeError naming it', async () => {
    expect(() => new StepwiseClient({ baseUrl: 'http://localhost', reconectMs: 5 } as never)).toThrow(
      'new StepwiseClient(): unknown option "reconectMs" (known: baseUrl, token, fetch, reconnectMs)',
    );
    const client = new StepwiseClient({ baseUrl: 'http://localhost' });
    await expect(client.stream('t', { logs: true } as never).next()).rejects.toThrow('client.stream(): unknown option "logs"');
    expect(() => new StepwiseChatTransport({ client, workflow: 'chat', session: {} } as never)).toThrow('new StepwiseChatTransport(): unknown option "session"');
  });
});

describe('unknown options of durable calls', () => {
  it('ctx.step, ctx.forEach, ctx.transaction and ctx.waitForEvent fail the task at the call, naming the key, before anything runs', async () => {
    const ran: string[] = [];
    const calls: Record<string, (ctx: WorkflowContext) => Promise<unknown>> = {
      step: (ctx) => ctx.step('charge', () => void ran.push('charge'), { retries: 3 } as never),
      forEach: (ctx) => ctx.forEach('each', [1, 2], () => void ran.push('item'), { chunksize: 1 } as never),
      transaction: (ctx) => ctx.transaction('tx', async () => void ran.push('tx'), { retires: 2 } as never),
      waitForEvent: (ctx) => ctx.waitForEvent('go', { timeuot: '1s' } as never),
    };
    const flows = Object.entries(calls).map(([name, fn]) => workflow(`typo-${name}`, fn));
    const engine = makeEngine({ workflows: flows });
    await startWorker(engine);
    const expected: Record<string, string> = {
      step: 'ctx.step("charge"): unknown option "retries" (known: retry, timeout,',
      forEach: 'ctx.forEach("each"): unknown option "chunksize" (known: retry,',
      transaction: 'ctx.transaction("tx"): unknown option "retires" (known: retry)',
      waitForEvent: 'ctx.waitForEvent("go"): unknown option "timeuot" (known: timeout)',
    };
    for (const [name] of Object.entries(calls)) {
      const { id } = await engine.start(`typo-${name}`);
      const err = await engine.result(id, { timeout: '30s' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect((err as Error).message).toContain(expected[name]);
      const info = await engine.get(id);
      expect(info).toMatchObject({ status: 'failed', error: { code: 'INVALID_ARGUMENT' } });
    }
    expect(ran).toEqual([]);
  });
});
