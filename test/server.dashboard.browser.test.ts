// The dashboard in a real browser (Debian's Chromium through playwright-core) against a server
// listening on a port, with a worker running the workflows in this process (a review that asks
// alice's approval through ctx.approval, a step that outlives its cancel, a model-using summary).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { Engine, workflow } from '../src/index.ts';
import { createServer } from '../src/server/index.ts';
import { artifactPath, chromiumAvailable, launchChromium } from './support/browser.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eventually, gate, FAST, waitForStatus } from './support/engine.ts';
import { TOKENS, tokenOf } from './support/server.ts';
import { review, summarize, ticket } from './fixtures/server-workflows.ts';
import { startFakeOpenAI, type FakeOpenAI } from './support/fake-openai.ts';
import OpenAI from 'openai';
import { chatCompletion } from '../src/ai/index.ts';

const hasChromium = chromiumAvailable();

/** A model step that streams through the local OpenAI-compatible server (started in beforeAll). */
let openai: OpenAI;
const liveWriter = workflow('live-writer', async (ctx) => {
  const r = await chatCompletion(ctx, 'write', openai, { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'go' }], stream: true });
  return r.choices[0]?.message.content;
});

/** The step of `stubborn` ends only when the test says so after its cancel, so "cancelling…" lasts. */
let letGo = gate();
const stubborn = workflow('stubborn', async (ctx) => {
  await ctx.step('prepare', () => 'ready');
  await ctx.step('generate', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => void letGo.promise.then(() => reject(signal.reason as Error)))));
});

/** Two steps whose runs are counted: what "Re-run from here" and "Fork from here" run again. */
const ran: string[] = [];
const twoSteps = workflow('two-steps', async (ctx, input: { n: number }) => {
  const a = await ctx.step('a', () => (ran.push('a'), input.n));
  return ctx.step('b', () => (ran.push('b'), a * 10));
});

/** Two steps with compensations: what "Undo and re-run from here" undoes, then runs again. */
const trip: string[] = [];
const booked = workflow('booked', async (ctx) => {
  await ctx.step('hold', () => (trip.push('hold'), 'H'), { compensate: () => void trip.push('release hold') });
  return ctx.step('pay', () => (trip.push('pay'), 'P'), { compensate: () => void trip.push('refund') });
});

describe.skipIf(!hasChromium)('dashboard in Chromium', () => {
  let browser: Browser;
  let engine: Engine;
  let url: string;
  let close: () => Promise<void>;
  // One database for the file's tests (the per-test helpers remove theirs after each test).
  const dir = mkdtempSync(join(tmpdir(), 'stepwise-dashboard-'));

  let fake: FakeOpenAI;

  beforeAll(async () => {
    fake = await startFakeOpenAI();
    openai = new OpenAI({ apiKey: 'test-key', baseURL: fake.baseURL, maxRetries: 0 });
    engine = new Engine({ store: `sqlite:${join(dir, 'dashboard.db')}`, workflows: [review, stubborn, summarize, ticket, liveWriter, twoSteps, booked] });
    await engine.worker({ ...FAST, leaseMs: 10_000 }).start();
    const server = createServer(engine, { tokens: TOKENS });
    ({ url, close } = await server.listen({ port: 0, hostname: '127.0.0.1' }));
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    letGo.open();
    await browser?.close();
    await close?.();
    await engine?.close();
    await fake?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function signIn(name: string): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${url}/`);
    expect(page.url()).toBe(`${url}/login`);
    await page.fill('input[name=token]', tokenOf(name));
    await page.click('button[type=submit]');
    await page.waitForURL(`${url}/`);
    await page.waitForSelector('h1:text("Tasks")');
    return page;
  }

  it('approves a waiting task with edited data and watches it finish', async () => {
    const t = await engine.start(review, { title: 'solar sails' });
    await waitForStatus(engine, t.id, 'waiting');
    const approval = (await engine.get(t.id)).approvals[0];
    expect(approval).toMatchObject({ name: 'publish', status: 'pending', approvers: ['alice'] });
    const a = approval?.id as string;
    const page = await signIn('alice');
    await page.click('a[data-view=mine]');
    await page.waitForSelector(`tr[data-task="${t.id}"]`);
    await page.screenshot({ path: artifactPath('dashboard-list.png'), fullPage: true });
    await page.click(`a[href="/tasks/${t.id}"]`);
    await page.waitForSelector(`section.task[data-task="${t.id}"] .badge[data-status=waiting]`);
    await page.waitForSelector('body[data-live-ready=true]');
    // The data box starts from the approval's payload (the draft), which alice edits.
    expect(JSON.parse(await page.inputValue(`[data-approval="${a}"] textarea[name=data]`))).toEqual({ text: 'Draft about solar sails' });
    await page.fill(`[data-approval="${a}"] textarea[name=comment]`, 'Looks good with a better title');
    await page.fill(`[data-approval="${a}"] textarea[name=data]`, JSON.stringify({ text: 'Solar sails, edited by alice' }));
    await page.screenshot({ path: artifactPath('dashboard-task-approval.png'), fullPage: true });
    await page.click(`[data-approval="${a}"] button[data-decide=approve]`);
    // Live: the page follows the task's log and shows it finish without a reload.
    await page.waitForSelector('section.task h1 .badge[data-status=succeeded]', { timeout: 20_000 });
    expect(await page.textContent('pre.output')).toContain('Solar sails, edited by alice');
    expect(await page.locator('tr[data-step=publish]').count()).toBe(1);
    expect(await page.getAttribute(`li[data-approval-id="${a}"]`, 'data-approval-status')).toBe('approved');
    expect(await page.textContent(`li[data-approval-id="${a}"] li[data-by=alice]`)).toContain('Looks good with a better title');
    await page.screenshot({ path: artifactPath('dashboard-task.png'), fullPage: true });
    const info = await engine.get(t.id);
    expect(info.history.find((e) => e.type === 'approval:decision')?.actor).toEqual({ kind: 'user', id: 'alice' });
    expect(info.approvals[0]?.decisions).toMatchObject([{ by: 'alice', approve: true, comment: 'Looks good with a better title', data: { text: 'Solar sails, edited by alice' } }]);
    await page.context().close();
  });

  it('re-runs a finished task from a step and forks one from a step into a new task (operator); a viewer sees neither button', async () => {
    const t = await engine.start(twoSteps, { n: 4 });
    expect(await engine.result(t.id, { timeout: '20s' })).toBe(40);
    ran.length = 0;
    const viewer = await signIn('vera');
    await viewer.goto(`${url}/tasks/${t.id}`);
    await viewer.waitForSelector('tr[data-step=b]');
    expect(await viewer.locator('button[data-rerun]').count()).toBe(0);
    await viewer.context().close();

    const page = await signIn('oscar');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('body[data-live-ready=true]');
    await page.click('tr[data-step=b] button[data-rerun=retry]:not([data-compensate])');
    await eventually(async () => (await engine.get(t.id)).retries === 1 && (await engine.get(t.id)).status === 'succeeded', 20_000, 're-run from b');
    expect(ran).toEqual(['b']);
    // The page reloaded to follow the re-run, and shows it finished with step b again (and its buttons).
    await page.waitForSelector('section.task h1 .badge[data-status=succeeded]', { timeout: 20_000 });

    await page.click('tr[data-step=b] button[data-rerun=fork]');
    await page.waitForURL((u) => u.pathname.startsWith('/tasks/') && !u.pathname.endsWith(t.id), { timeout: 20_000 });
    const forkId = page.url().split('/').at(-1) as string;
    expect(await engine.result(forkId, { timeout: '20s' })).toBe(40);
    expect(ran).toEqual(['b', 'b']);
    await page.waitForSelector(`dd.forked a[href="/tasks/${t.id}"]`);
    expect((await engine.get(forkId)).forkedFrom).toBe(t.id);
    await page.context().close();
  });

  it('undoes a succeeded task from a step, then re-runs it from there, after asking (operator)', async () => {
    const t = await engine.start(booked);
    expect(await engine.result(t.id, { timeout: '20s' })).toBe('P');
    trip.length = 0;
    const page = await signIn('oscar');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('body[data-live-ready=true]');
    // Declined: nothing happens.
    page.once('dialog', (d) => void d.dismiss());
    await page.click('tr[data-step=hold] button[data-compensate]');
    expect((await engine.get(t.id)).retries).toBe(0);
    page.once('dialog', (d) => void d.accept());
    await page.click('tr[data-step=hold] button[data-compensate]');
    await eventually(async () => (await engine.get(t.id)).retries === 1 && (await engine.get(t.id)).status === 'succeeded', 20_000, 'the undo and the re-run');
    expect(trip).toEqual(['refund', 'release hold', 'hold', 'pay']);
    await page.context().close();
  });

  it('cancels every task of a filtered view from the bulk bar after counting and asking', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await engine.start(review, { title: `bulk ${i}` }, { tags: { batch: 'bulk-x' } })).id);
    const spare = (await engine.start(review, { title: 'spare' }, { tags: { batch: 'bulk-y' } })).id;
    for (const id of [...ids, spare]) await waitForStatus(engine, id, 'waiting');
    const page = await signIn('oscar');
    await page.goto(`${url}/?tags=batch%3Dbulk-x`);
    await page.waitForSelector(`tr[data-task="${ids[0]}"]`);
    let asked = '';
    page.on('dialog', (d) => {
      asked = d.message();
      void d.accept();
    });
    await page.click('button[data-bulk=cancel]');
    await eventually(async () => (await Promise.all(ids.map(async (id) => (await engine.get(id)).status))).every((s) => s === 'cancelled'), 20_000, 'bulk cancel');
    expect(asked).toBe('cancel 3 task(s)?');
    expect((await engine.get(spare)).status).toBe('waiting');
    expect((await engine.get(ids[0] as string)).history.find((e) => e.type === 'transition' && e.event === 'cancel')?.actor).toEqual({ kind: 'user', id: 'oscar' });
    await page.context().close();
  });

  it('moves a state machine with its event buttons, draws it with the current state, and shows the states it went through', async () => {
    const t = await engine.start(ticket, { subject: 'printer on fire' });
    await eventually(async () => (await engine.get(t.id)).machine?.legalEvents.length === 2, 20_000, 'the ticket open');
    const page = await signIn('oscar');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('body[data-live-ready=true]');
    await page.waitForSelector('section.machine[data-machine-state=open]');
    expect(await page.locator('section.machine button[data-send]').allTextContents()).toEqual(['resolve', 'escalate']);
    expect(await page.getAttribute('svg.machine g.node.current', 'data-status')).toBe('open');
    await page.click('section.machine button[data-send=escalate]');
    // Live: the machine goes round to open again, escalated; a second escalation is refused by its guard.
    await page.waitForSelector('section.machine ol.states li:nth-child(3)', { timeout: 20_000 });
    await page.waitForSelector('section.machine button[data-send=escalate]');
    await page.click('section.machine button[data-send=escalate]');
    await page.waitForSelector('#flash.error');
    expect(await page.textContent('#flash')).toContain('every guard of "escalate" refused it');
    await page.fill('section.machine textarea[name=payload]', '{"note":"replaced the toner"}');
    await page.screenshot({ path: artifactPath('dashboard-machine.png'), fullPage: true });
    await page.click('section.machine button[data-send=resolve]');
    await page.waitForSelector('section.task h1 .badge[data-status=succeeded]', { timeout: 20_000 });
    await page.waitForSelector('section.machine[data-machine-state=closed]');
    expect(await page.locator('section.machine ol.states li').evaluateAll((li) => li.map((x) => (x as unknown as { dataset: { state: string } }).dataset.state))).toEqual([
      'triage',
      'open',
      'open',
      'closed',
    ]);
    expect(await page.locator('section.machine button[data-send]').count()).toBe(0);
    expect(await engine.result(t.id)).toMatchObject({ state: 'closed', context: { escalated: true, resolution: 'replaced the toner' } });
    await page.context().close();
  }, 60_000);

  it('cancels a running task: shows "cancelling…" until it is cancelled', async () => {
    letGo = gate();
    const t = await engine.start(stubborn);
    const page = await signIn('oscar');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('body[data-live-ready=true]');
    // The page turns to running by itself when the worker claims the task.
    await page.waitForSelector('section.task h1 .badge[data-status=running]', { timeout: 20_000 });
    await page.waitForSelector('button[data-action=cancel]');
    await page.click('button[data-action=cancel]');
    const badge = page.locator('section.task h1 .badge');
    await page.waitForSelector('section.task h1 .badge[data-status=cancelling]');
    expect(await badge.textContent()).toBe('cancelling…');
    expect((await engine.get(t.id)).status).toBe('cancelling');
    letGo.open();
    await page.waitForSelector('section.task h1 .badge[data-status=cancelled]', { timeout: 20_000 });
    expect(await badge.textContent()).toBe('cancelled');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    await page.context().close();
  });

  it('deletes a finished task for an admin after a confirmation, and offers no delete to an operator or for an unfinished task', async () => {
    const done = await engine.start(summarize, { pages: 1 });
    await done.result();
    const operator = await signIn('oscar');
    await operator.goto(`${url}/tasks/${done.id}`);
    await operator.waitForSelector('section.task .badge[data-status=succeeded]');
    expect(await operator.locator('button[data-delete]').count()).toBe(0);
    await operator.context().close();

    const waiting = await engine.start(review, { title: 'not yet' });
    await waitForStatus(engine, waiting.id, 'waiting');
    const page = await signIn('ada');
    await page.goto(`${url}/tasks/${waiting.id}`);
    await page.waitForSelector('section.task .badge[data-status=waiting]');
    expect(await page.locator('button[data-delete]').count()).toBe(0);

    await page.goto(`${url}/tasks/${done.id}`);
    await page.waitForSelector('body[data-live-ready=true]');
    // Dismissing the confirmation deletes nothing; accepting it deletes the task and goes to the list.
    page.once('dialog', (d) => void d.dismiss());
    await page.click('button[data-delete]');
    expect((await engine.get(done.id)).status).toBe('succeeded');
    page.once('dialog', (d) => {
      expect(d.message()).toContain(`Delete task ${done.id}`);
      void d.accept();
    });
    await page.click('button[data-delete]');
    await page.waitForURL(`${url}/?deleted=${done.id}`);
    expect(await page.locator('p.note').textContent()).toContain(`Task ${done.id} was deleted.`);
    await expect(engine.get(done.id)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await page.context().close();
  });

  it('shows a viewer no action buttons and refuses a forged POST from its session', async () => {
    const t = await engine.start(review, { title: 'forgery' });
    await waitForStatus(engine, t.id, 'waiting');
    const page = await signIn('vera');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('section.task .badge[data-status=waiting]');
    expect(await page.locator('button[data-action]').count()).toBe(0);
    expect(await page.locator('button[data-decide]').count()).toBe(0);
    const approvalId = (await engine.get(t.id)).approvals[0]?.id as string;
    const forged = await page.evaluate(
      async ([id, approvalId]) => {
        const withHeader = await fetch(`/api/tasks/${id}/cancel`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-stepwise-csrf': '1' }, body: '{}' });
        const decide = await fetch(`/api/approvals/${approvalId}/decide`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-stepwise-csrf': '1' },
          body: '{"approve":true}',
        });
        const noHeader = await fetch(`/api/tasks/${id}/cancel`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        return [withHeader.status, decide.status, noHeader.status, (await withHeader.json()) as { error: { code: string } }] as const;
      },
      [t.id, approvalId] as const,
    );
    expect(forged.slice(0, 3)).toEqual([403, 403, 403]);
    expect(forged[3].error.code).toBe('FORBIDDEN');
    const info = await engine.get(t.id);
    expect(info.status).toBe('waiting');
    expect(info.approvals[0]).toMatchObject({ status: 'pending', decisions: [] });
    expect(info.history.filter((e) => e.actor.id === 'vera')).toEqual([]);
    await page.context().close();
  });

  it("shows each step's tokens and cost in the timeline and the task's total", async () => {
    const t = await engine.start(summarize, { pages: 5 });
    await t.result();
    const page = await signIn('vera');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('section.task h1 .badge[data-status=succeeded]');
    // read: 6000 in + 300 out at $1/$3 per million; write: 800 in + 400 out.
    expect(await page.getAttribute('tr[data-step=read] td.tokens', 'data-tokens')).toBe('6300');
    expect(await page.textContent('tr[data-step=read] td.cost')).toBe('$0.0069');
    expect(await page.getAttribute('tr[data-step=write] td.tokens', 'data-tokens')).toBe('1200');
    expect(await page.textContent('tr[data-step=write] td.cost')).toBe('$0.0020');
    expect(await page.getAttribute('tfoot tr.total td.tokens', 'data-tokens')).toBe('7500');
    expect(await page.textContent('tfoot tr.total td.cost')).toBe('$0.0089');
    expect(await page.textContent('dd.cost-total')).toBe('$0.0089');
    await page.screenshot({ path: artifactPath('dashboard-task-usage.png'), fullPage: true });
    await page.context().close();
  });
  it('signs in with a session id in the cookie (not the token), and signing out ends the session for good', async () => {
    const page = await signIn('vera');
    const cookie = (await page.context().cookies()).find((c) => c.name === 'stepwise_session');
    expect(cookie?.value).toBeTruthy();
    expect(cookie?.value).not.toContain(tokenOf('vera'));
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    const headers = { cookie: `stepwise_session=${cookie?.value}` };
    expect((await fetch(`${url}/api/tasks`, { headers })).status).toBe(200);
    await page.click('header form[action="/logout"] button');
    await page.waitForURL(`${url}/login`);
    // The old cookie, replayed from elsewhere, is refused.
    expect((await fetch(`${url}/api/tasks`, { headers })).status).toBe(401);
    await page.context().close();
  });

  it('lists schedules with their next run, pauses one, and runs one now into its task page; a viewer sees no buttons', async () => {
    await engine.schedules.create({ id: 'browser-nightly', workflow: 'ticket', cron: '0 3 * * *', timezone: 'Europe/Berlin', input: { subject: 'nightly' } });
    const page = await signIn('oscar');
    await page.click('header a[href="/schedules"]');
    await page.waitForSelector('tr[data-schedule-row="browser-nightly"]');
    expect(await page.textContent('tr[data-schedule-row="browser-nightly"]')).toContain('0 3 * * *');
    await page.click('tr[data-schedule-row="browser-nightly"] button[data-schedule-action=pause]');
    await page.waitForSelector('tr[data-schedule-row="browser-nightly"] button[data-schedule-action=resume]');
    expect((await engine.schedules.get('browser-nightly')).paused).toBe(true);
    await page.click('tr[data-schedule-row="browser-nightly"] button[data-schedule-action=trigger]');
    await page.waitForURL(/\/tasks\/[0-9A-Za-z]+$/);
    const taskId = page.url().split('/').at(-1) as string;
    expect((await engine.get(taskId)).workflow).toBe('ticket');
    const viewer = await signIn('vera');
    await viewer.goto(`${url}/schedules`);
    await viewer.waitForSelector('tr[data-schedule-row="browser-nightly"]');
    expect(await viewer.$$('button[data-schedule-action]')).toHaveLength(0);
  });

  it('approves without editing: the workflow gets no data (as from the API), only the decision', async () => {
    const t = await engine.start(review, { title: 'unedited' });
    await waitForStatus(engine, t.id, 'waiting');
    const page = await signIn('alice');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.click('[data-approval] button[data-decide=approve]');
    await waitForStatus(engine, t.id, 'succeeded');
    const [approval] = (await engine.get(t.id)).approvals;
    expect(approval?.decisions.map((d) => [d.by, d.approve, d.data ?? null])).toEqual([['alice', true, null]]);
  });

  it('takes the decision buttons away from a task page left open when the task is cancelled elsewhere', async () => {
    const t = await engine.start(review, { title: 'cancelled elsewhere' });
    await waitForStatus(engine, t.id, 'waiting');
    const page = await signIn('alice');
    await page.goto(`${url}/tasks/${t.id}`);
    await page.waitForSelector('[data-approval] button[data-decide=approve]');
    await page.waitForSelector('body[data-live-ready=true]');
    await engine.cancel(t.id, { reason: 'withdrawn by the author' });
    await waitForStatus(engine, t.id, 'cancelled');
    await page.waitForSelector('[data-approval] button[data-decide]', { state: 'detached', timeout: 15_000 });
    expect(await page.$$('[data-approval] button[data-decide]')).toHaveLength(0);
  });

  it("shows a running model step's tokens live on the task page, and keeps them through the page's re-render at the end", async () => {
    const release = gate();
    fake.script([{ kind: 'text', chunks: ['Durable ', 'agents ', 'stream ', 'live.'], stallAfter: 2, resume: release.promise }]);
    const t = await engine.start(liveWriter);
    await fake.waitForRequest(1, 2);
    const page = await signIn('vera');
    await page.goto(`${url}/tasks/${t.id}`);
    // The model is stalled after two tokens: what the page shows came while the step runs.
    const pre = '[data-streams] [data-stream-step=write] pre';
    // Polled through a locator (Playwright's own script), not waitForFunction: the dashboard's
    // Content-Security-Policy forbids the eval a polled page function needs.
    const shown = (): Promise<string | null> =>
      page
        .locator(pre)
        .textContent({ timeout: 1_000 })
        .catch(() => null);
    await expect.poll(shown, { timeout: 15_000 }).toBe('Durable agents ');
    expect((await engine.get(t.id)).status).toBe('running');
    await page.screenshot({ path: artifactPath('dashboard-live-tokens.png'), fullPage: true });
    release.open();
    await waitForStatus(engine, t.id, 'succeeded');
    await expect.poll(shown, { timeout: 15_000 }).toBe('Durable agents stream live.');
    // The page's re-render on the task's end kept the text.
    await page.waitForSelector(`section.task[data-task="${t.id}"] .badge[data-status=succeeded]`);
    expect(await page.textContent(pre)).toBe('Durable agents stream live.');
  });
});
