/**
 * The content pipeline of the seed article: generate → (risk rule) review → publish → notify.
 *
 * - generate: a (simulated, streaming) model writes the draft; checkpointed, so a crash never pays
 *   for it twice.
 * - risk rule: only a high-impact change needs a person. A low-impact one is published at once;
 *   a high-impact one parks on the `editorial-review` approval (no worker slot held) until an
 *   editor decides, with reminders every 30 minutes and, after 2 hours, an escalation to the
 *   managing editor for one more hour before it is rejected.
 * - publish: one call to the CMS with the step's idempotency key, so a retried publish (a gateway
 *   that timed out after the CMS had stored the article) cannot publish twice. For a high-impact
 *   change the engine itself refuses the step unless the review is approved on record.
 * - notify: tells the initiator the outcome (published, or why not), once.
 */
import { appendFileSync } from 'node:fs';
import { RetryableError, workflow } from '../../src/index.ts';
import { createSimulatedModel } from '../research-brief/llm.ts';

export interface ContentInput {
  title: string;
  brief: string;
  /** `high`: a change with real consequences (prices, legal text, a launch); `low`: a typo fix. */
  impact: 'low' | 'high';
  cmsUrl: string;
  /** Where notifications to the initiator go (one JSON line each). */
  outbox: string;
  editors?: string[];
}

export interface ContentResult {
  published: boolean;
  articleId: string | null;
  reviewedBy: string | null;
  reason: string;
}

export const contentPipeline = workflow('content-pipeline', async (ctx, input: ContentInput): Promise<ContentResult> => {
  const model = createSimulatedModel({ tokensPerSecond: 400 });
  const draft = await ctx.step('generate', async ({ signal, idempotencyKey }) => {
    const { textStream } = model.streamText({ system: 'You write short product announcements.', prompt: input.brief, signal, idempotencyKey });
    let text = '';
    for await (const chunk of textStream) text += chunk;
    return { title: input.title, body: text.trim() };
  });

  // The risk rule: only high-impact changes wait for a person.
  const needsReview = input.impact === 'high';
  let body = draft.body;
  let reviewedBy: string | null = null;
  if (needsReview) {
    const review = await ctx.approval('editorial-review', {
      payload: { ...draft, impact: input.impact },
      approvers: input.editors ?? ['editor'],
      timeout: '2h',
      remindEvery: '30m',
      onTimeout: { escalate: ['managing-editor'], timeout: '1h', then: 'reject' },
    });
    if (!review.approved) {
      const reason = review.timedOut ? `nobody reviewed it in time (${review.escalations} escalation(s))` : `rejected by ${review.by}: ${review.comment ?? 'no comment'}`;
      await ctx.step('notify', () => void appendFileSync(input.outbox, `${JSON.stringify({ task: ctx.taskId, published: false, reason })}\n`));
      return { published: false, articleId: null, reviewedBy: review.by, reason };
    }
    body = (review.data as { body?: string } | null)?.body ?? draft.body;
    reviewedBy = review.by;
  }

  const article = await ctx.step(
    'publish',
    async ({ idempotencyKey, signal }) => {
      const res = await fetch(`${input.cmsUrl}/articles`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify({ title: draft.title, body }),
        signal,
      });
      if (res.status >= 500) throw new RetryableError(`CMS answered ${res.status}`);
      if (!res.ok) throw new Error(`CMS refused the article: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string; replayed: boolean };
    },
    { retry: { maxAttempts: 4, initialDelay: '50ms' }, ...(needsReview ? { requires: 'editorial-review' } : {}) },
  );
  const reason = needsReview ? `approved by ${reviewedBy}` : 'low impact: published without review';
  await ctx.step('notify', () => void appendFileSync(input.outbox, `${JSON.stringify({ task: ctx.taskId, published: true, article: article.id, reason })}\n`));
  return { published: true, articleId: article.id, reviewedBy, reason };
});
