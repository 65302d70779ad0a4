// Group commit keyed by task: a task's writes never go out in two batches at once (in the
// database the second would only wait on the first's row lock and pay a commit of its own); they
// wait for its batch in flight and then go out together, in order, while other tasks' writes go on.
import { describe, expect, it } from 'vitest';
import { GroupCommit, type Pending } from '../src/group-commit.ts';

interface Op {
  task: string;
  n: number;
}

/** A GroupCommit whose batches finish when the test says so; records each batch's ops as `task:n`. */
function harness(maxBatch: number, maxInFlight: number) {
  const batches: string[][] = [];
  const finish: Array<() => void> = [];
  const group = new GroupCommit<Op, string>(
    (batch: Array<Pending<Op, string>>) => {
      batches.push(batch.map((p) => `${p.item.task}:${p.item.n}`));
      return new Promise<void>((resolve) =>
        finish.push(() => {
          for (const p of batch) p.resolve(`${p.item.task}:${p.item.n}`);
          resolve();
        }),
      );
    },
    maxBatch,
    maxInFlight,
    (op) => op.task,
  );
  const tick = () => new Promise((r) => setImmediate(r));
  return { group, batches, finish, tick };
}

describe('group commit keyed by task', () => {
  it("holds a task's writes while its batch is in flight, sends other tasks' writes at once, then sends the held ones together in order", async () => {
    const { group, batches, finish, tick } = harness(256, 2);
    const answers: string[] = [];
    const write = (task: string, n: number) => void group.enqueue({ task, n }).then((a) => answers.push(a));
    write('a', 1);
    await tick();
    expect(batches).toEqual([['a:1']]);
    // While a's first batch is in flight: more of a, and one of b.
    write('a', 2);
    write('b', 1);
    write('a', 3);
    await tick();
    expect(batches).toEqual([['a:1'], ['b:1']]); // b went out in the second slot; a's writes wait
    expect(group.queued).toBe(2);
    (finish[0] as () => void)();
    await tick();
    expect(batches[2]).toEqual(['a:2', 'a:3']); // together, in order, once a's batch finished
    (finish[1] as () => void)();
    (finish[2] as () => void)();
    await tick();
    expect(answers).toEqual(['a:1', 'b:1', 'a:2', 'a:3']);
    expect(group.queued).toBe(0);
    expect(group.inFlight).toBe(0);
  });

  it('keeps the order of a task whose writes did not fit in one batch, and never sends them in two batches at once', async () => {
    const { group, batches, finish, tick } = harness(2, 4);
    for (let n = 1; n <= 5; n++) void group.enqueue({ task: 'a', n });
    void group.enqueue({ task: 'b', n: 1 });
    await tick();
    // The first batch is full with a's first two; a's others wait for it (though slots are free); b goes.
    expect(batches).toEqual([['a:1', 'a:2'], ['b:1']]);
    (finish[0] as () => void)();
    await tick();
    expect(batches[2]).toEqual(['a:3', 'a:4']);
    expect(batches).toHaveLength(3);
    (finish[2] as () => void)();
    await tick();
    expect(batches[3]).toEqual(['a:5']);
  });

  it("a write made outside a batch keeps its task busy until it ends; tried again, it goes ahead of the task's writes queued meanwhile", async () => {
    const { group, batches, finish, tick } = harness(256, 4);
    const direct = { task: 'a', n: 1 };
    group.begin(direct);
    void group.enqueue({ task: 'a', n: 2 });
    void group.enqueue({ task: 'b', n: 1 });
    await tick();
    expect(batches).toEqual([['b:1']]); // a:2 waits for the direct write of a
    // The direct write failed: queued again first, then its end frees the task.
    void group.enqueueFirst(direct);
    group.end(direct);
    await tick();
    expect(batches[1]).toEqual(['a:1', 'a:2']);
    (finish[0] as () => void)();
    (finish[1] as () => void)();
    await tick();
    expect(group.inFlight).toBe(0);
  });

  it('without a key, batches go out as soon as a slot is free, as before', async () => {
    const batches: number[][] = [];
    const group = new GroupCommit<number, number>(
      async (batch) => {
        batches.push(batch.map((p) => p.item));
        await new Promise((r) => setTimeout(r, 5));
        for (const p of batch) p.resolve(p.item);
      },
      256,
      2,
    );
    const first = group.enqueue(1);
    await new Promise((r) => setImmediate(r));
    const rest = [group.enqueue(2), group.enqueue(3)];
    await Promise.all([first, ...rest]);
    expect(batches).toEqual([[1], [2, 3]]);
  });
});
