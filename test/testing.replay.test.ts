// checkReplay (stepwise-engine/testing): a task recorded by one version of a workflow's code is
// replayed against another, in a scratch database, with no side effect. Each case runs a real task
// to the point it needs, then replays it against changed code.
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow, type Engine, type Workflow } from '../src/index.ts';
import { checkReplay, isReplayCheckError, type ReplayCheckError } from '../src/testing/index.ts';
import { makeEngine, startWorker, waitForStatus } from './support/engine.ts';

/** Runs `wf` on a fresh engine until the task is in one of `statuses`; returns the engine and the task id. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function recorded(wf: Workflow<any, any>, statuses: Parameters<typeof waitForStatus>[2], signals: Array<[string, unknown]> = []): Promise<{ engine: Engine; id: string }> {
  const engine = makeEngine({ workflows: [wf] });
  const worker = await startWorker(engine);
  const { id } = await engine.start(wf, {});
  for (const [name, payload] of signals) await engine.signal(id, name, payload);
  await waitForStatus(engine, id, statuses);
  await worker.stop();
  return { engine, id };
}

async function replayFailure(p: Promise<unknown>): Promise<ReplayCheckError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!isReplayCheckError(e)) throw new Error(`expected a ReplayCheckError, got ${e instanceof Error ? e.stack : String(e)}`);
  return e;
}

const ran: string[] = [];
const step = (name: string, value: unknown) => () => {
  ran.push(name);
  return value;
};

const v1 = workflow(
  'publish',
  async (ctx) => {
    const draft = await ctx.step('draft', step('draft', 'text'));
    const review = await ctx.waitForEvent<{ ok: boolean }>('review');
    await ctx.step('publish', step('publish', draft));
    return { ok: !review.timedOut && review.payload.ok };
  },
  { version: 1 },
);

describe('checkReplay', () => {
  it('a finished task replays against its own code: same end, and no step function runs, nothing is written to its database', async () => {
    const { engine, id } = await recorded(v1, 'succeeded', [['review', { ok: true }]]);
    const before = await engine.get(id);
    ran.length = 0;
    const report = await checkReplay(engine, id);
    expect(report).toMatchObject({ taskId: id, workflow: 'publish', status: 'succeeded', recordedVersion: '1', version: '1', served: true, recorded: 3, ended: 'same-end', next: null });
    expect(ran).toEqual([]);
    expect(await engine.get(id)).toEqual(before);
  });

  it('code whose step was renamed does not replay: NON_DETERMINISM names the position and both steps, and the new step never runs', async () => {
    const { engine, id } = await recorded(v1, 'succeeded', [['review', { ok: true }]]);
    const v2 = workflow(
      'publish',
      async (ctx) => {
        const draft = await ctx.step('write-draft', step('write-draft', 'text')); // renamed
        const review = await ctx.waitForEvent<{ ok: boolean }>('review');
        await ctx.step('publish', step('publish', draft));
        return { ok: !review.timedOut && review.payload.ok };
      },
      { version: 1 },
    );
    ran.length = 0;
    const e = await replayFailure(checkReplay(engine, id, { workflow: v2 }));
    expect(e.reason).toBe('non-determinism');
    expect(e.message).toContain(`checkReplay("publish", task ${id}, recorded under version 1, replayed by version 1): the code does not replay the journal`);
    expect(e.message).toMatch(/position 0/);
    expect(e.message).toContain('"draft"');
    expect(e.message).toContain('"write-draft"');
    expect(ran).toEqual([]);
  });

  it('code that adds a step after the last recorded call: a finished task would not end as it did; the step is not run', async () => {
    const { engine, id } = await recorded(v1, 'succeeded', [['review', { ok: true }]]);
    const v2 = workflow(
      'publish',
      async (ctx) => {
        const draft = await ctx.step('draft', step('draft', 'text'));
        const review = await ctx.waitForEvent<{ ok: boolean }>('review');
        await ctx.step('publish', step('publish', draft));
        await ctx.step('notify', step('notify', null)); // new
        return { ok: !review.timedOut && review.payload.ok };
      },
      { version: 2 },
    );
    ran.length = 0;
    const e = await replayFailure(checkReplay(engine, id, { workflow: v2 }));
    expect(e.reason).toBe('new-call');
    expect(e.message).toContain('the task succeeded, but the code went on past its journal: step "notify" (attempt 1)');
    expect(ran).toEqual([]);
  });

  it('code that returns something else from the same calls ends otherwise', async () => {
    const { engine, id } = await recorded(v1, 'succeeded', [['review', { ok: true }]]);
    const v2 = workflow(
      'publish',
      async (ctx) => {
        const draft = await ctx.step('draft', step('draft', 'text'));
        const review = await ctx.waitForEvent<{ ok: boolean }>('review');
        await ctx.step('publish', step('publish', draft));
        return { ok: !review.timedOut && review.payload.ok, version: 2 };
      },
      { version: 2, compatibleVersions: [1] },
    );
    const e = await replayFailure(checkReplay(engine, id, { workflow: v2 }));
    expect(e.reason).toBe('other-end');
    expect(e.message).toContain('the code returns another output at .version: undefined recorded, 2 now');
  });

  it('a task still waiting replays up to its wait; code that adds a step after the wait goes on, code that adds one before it does not replay', async () => {
    const { engine, id } = await recorded(v1, 'waiting');
    const after = workflow(
      'publish',
      async (ctx) => {
        const draft = await ctx.step('draft', step('draft', 'text'));
        const review = await ctx.waitForEvent<{ ok: boolean }>('review');
        await ctx.step('check', step('check', null)); // new, after the wait
        await ctx.step('publish', step('publish', draft));
        return { ok: !review.timedOut && review.payload.ok };
      },
      { version: 2 },
    );
    const report = await checkReplay(engine, id, { workflow: after });
    expect(report).toMatchObject({ status: 'waiting', served: false, ended: 'goes-on', next: 'the park transition with the start of event wait "review"' });
    const before = workflow(
      'publish',
      async (ctx) => {
        const draft = await ctx.step('draft', step('draft', 'text'));
        await ctx.step('check', step('check', null)); // new, before the wait
        const review = await ctx.waitForEvent<{ ok: boolean }>('review');
        await ctx.step('publish', step('publish', draft));
        return { ok: !review.timedOut && review.payload.ok };
      },
      { version: 2 },
    );
    ran.length = 0;
    const e = await replayFailure(checkReplay(engine, id, { workflow: before }));
    expect(e.reason).toBe('non-determinism');
    expect(ran).toEqual([]);
  });

  it('a task that failed replays to the same failure', async () => {
    const failing = workflow('failing', async (ctx) => {
      await ctx.step('a', step('a', 1));
      await ctx.step(
        'b',
        () => {
          throw new Error('no such page');
        },
        { retry: 1 },
      );
    });
    const { engine, id } = await recorded(failing, 'failed');
    const report = await checkReplay(engine, id);
    expect(report).toMatchObject({ status: 'failed', ended: 'same-end' });
  });

  it('refuses bad arguments', async () => {
    const { engine, id } = await recorded(v1, 'waiting');
    for (const [args, message] of [
      [[{}, id], /must be an Engine/],
      [[engine, ''], /a task id is required/],
      [[engine, id, { workflows: v1 }], /unknown option "workflows"/],
      [[engine, id, { workflow: {} }], /options.workflow must be a workflow/],
      [[engine, id, { workflow: workflow('other', async () => 1) }], /is of workflow "publish", not "other"/],
    ] as const) {
      const e = await (checkReplay as (...a: unknown[]) => Promise<unknown>)(...args).then(
        () => null,
        (err: unknown) => err as { code?: string; message: string },
      );
      expect(e?.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
      expect(e?.message).toMatch(message);
    }
    await expect(checkReplay(engine, '01nosuchtask')).rejects.toMatchObject({ code: ERROR_CODES.TASK_NOT_FOUND });
  });
});
