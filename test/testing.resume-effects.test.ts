// checkResume reads effects() only once the dead worker's step functions have returned (a step
// that was running when its process died goes on and does its effect, late), and refuses effects
// that are not JSON data (a Set or a Map compares as `{}`, and a double effect would pass).
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, workflow } from '../src/index.ts';
import { checkResume, isResumeCheckError, type ResumeCheckError } from '../src/testing/index.ts';

async function failure(p: Promise<unknown>): Promise<ResumeCheckError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!isResumeCheckError(e)) throw new Error(`expected a ResumeCheckError, got ${e instanceof Error ? e.stack : String(e)}`);
  return e;
}

/**
 * A chat API whose first call in each run is slow (a cold connection): when the worker dies while
 * that call is on its way, the call lands after the next worker's call. With `dedupe`, posts with
 * the same idempotency key count once.
 */
function slowFirstChat(dedupe: boolean) {
  let posts: Array<{ text: string; key: string }> = [];
  let calls = 0;
  return {
    reset() {
      posts = [];
      calls = 0;
    },
    async post(text: string, key: string): Promise<{ ok: true }> {
      if (++calls === 1) await new Promise((r) => setTimeout(r, 300));
      if (!dedupe || !posts.some((p) => p.key === key)) posts.push({ text, key });
      return { ok: true };
    },
    posts: () => posts.map((p) => p.text),
  };
}

/** Two steps in parallel: `tag` returns at once (its write is the first crash point), `announce` posts, slowly the first time. */
function announcing(name: string, chat: ReturnType<typeof slowFirstChat>, withKey: boolean) {
  return workflow(name, async (ctx) => {
    const [tag] = await Promise.all([ctx.step('tag', () => 'v1'), ctx.step('announce', ({ idempotencyKey }) => chat.post('released', withKey ? idempotencyKey : `call-${Math.random()}`))]);
    return ctx.step('done', () => `announced ${tag}`);
  });
}

describe("checkResume waits for the dead worker's running steps before it reads effects()", () => {
  it('catches a double post by a step that was still running when its worker died, though the post lands after the next worker finished the task', async () => {
    const chat = slowFirstChat(false);
    const e = await failure(checkResume(announcing('double-post', chat, false), { setup: () => chat.reset(), effects: () => chat.posts() }));
    expect(e.reason).toBe('effects-differ');
    // The first crash point: the worker dies before the write of "tag", with "announce" on its way.
    expect(e.point).toMatchObject({ write: 1, when: 'before', what: 'the result of step "tag"' });
    expect(e.message).toContain('at [1]: undefined without a crash, "released" after it');
    expect(e.message).toContain('Steps that ran again: "tag", "announce"');
  });

  it("passes a step that hands its idempotencyKey to an API that deduplicates, though the dead worker's call lands late (it is not counted in the next run)", async () => {
    const chat = slowFirstChat(true);
    const report = await checkResume(announcing('deduplicated-post', chat, true), { setup: () => chat.reset(), effects: () => chat.posts() });
    expect(report.baseline.effects).toEqual(['released']);
    expect(report.points.length).toBeGreaterThanOrEqual(4);
    expect(report.points[0]).toMatchObject({ write: 1, when: 'before', interrupted: ['tag', 'announce'] });
  });
});

describe('checkResume refuses effects() that are not JSON data', () => {
  const twice = workflow('posts-twice-outside-steps', async (ctx) => {
    sent.add(`post ${sent.size + 1}`); // outside any step: again on every replay
    return ctx.step('only', () => 'ok');
  });
  let sent = new Set<string>();

  it('a Set (it would compare as {} and hide the double effect) is INVALID_ARGUMENT that says to return an array', async () => {
    const e = (await checkResume(twice, { setup: () => void (sent = new Set()), effects: () => sent }).catch((err: unknown) => err)) as Error & { code?: string };
    expect(e.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
    expect(e.message).toContain('effects() must return JSON data');
    expect(e.message).toContain('a Set');
    expect(e.message).toContain('[...set]');
    // The same effects as an array: the double effect is caught.
    const caught = await failure(checkResume(twice, { setup: () => void (sent = new Set()), effects: () => [...sent] }));
    expect(caught.reason).toBe('effects-differ');
  });

  it('a Map, a Date, a function or a class instance anywhere inside is refused, with where it is', async () => {
    class Post {
      constructor(readonly text: string) {}
    }
    const cases: Array<[unknown, string]> = [
      [new Map([['a', 1]]), 'the value: a Map'],
      [{ at: new Date(0) }, '.at: a Date'],
      [[{ send: () => 1 }], '[0].send: a function'],
      [{ posts: [new Post('x')] }, '.posts[0]: a Post'],
      [{ n: Number.NaN }, '.n: the number NaN'],
    ];
    for (const [value, where] of cases) {
      const e = (await checkResume(twice, { setup: () => void (sent = new Set()), effects: () => value }).catch((err: unknown) => err)) as Error & { code?: string };
      expect(e.code).toBe(ERROR_CODES.INVALID_ARGUMENT);
      expect(e.message).toContain(`it returned ${where}`);
    }
  });
});
