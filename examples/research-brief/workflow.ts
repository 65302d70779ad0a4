/**
 * The "research brief" agent: gather local documents → summarise each with a (simulated,
 * streaming) language model → merge the summaries → an editor reviews the brief (the task parks
 * until someone decides) → write the approved brief to a file.
 *
 * Every step is checkpointed: after a crash the task resumes after the last completed step, and
 * the recorded model outputs are reused instead of being generated (and paid for) again.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { workflow } from '../../src/index.ts';
import { countTokens, createSimulatedModel, type Usage } from './llm.ts';

export interface BriefInput {
  topic: string;
  docsDir: string;
  outDir: string;
  /** Where the simulated model logs its calls (to show which ones ran twice). */
  callLog?: string;
  /** Who may approve the brief. @defaultValue ['editor'] */
  reviewers?: string[];
}

export interface Summary {
  doc: string;
  title: string;
  summary: string;
  usage: Usage;
}

export const researchBrief = workflow(
  'research-brief',
  async (ctx, input: BriefInput) => {
    const model = createSimulatedModel({ tokensPerSecond: 70, ...(input.callLog ? { callLog: input.callLog } : {}) });

    // 1. Gather: list and read the local documents.
    const docs = await ctx.step('gather', () =>
      readdirSync(input.docsDir)
        .filter((f) => f.endsWith('.md'))
        .sort()
        .map((file) => {
          const text = readFileSync(join(input.docsDir, file), 'utf8');
          return { file, title: (/^#\s*(.+)$/m.exec(text)?.[1] ?? file).trim(), text };
        }),
    );

    // 2. Summarise each document with a streaming model call (one checkpointed step per document).
    const summaries: Summary[] = [];
    for (const doc of docs) {
      summaries.push(
        await ctx.step(
          'summarise',
          async ({ signal, idempotencyKey }) => {
            const { textStream, usage } = model.streamText({
              system: `You write two-sentence summaries for a brief on "${input.topic}".`,
              prompt: `Summarise this document.\n---\n${doc.text}`,
              signal,
              idempotencyKey,
            });
            let summary = '';
            for await (const chunk of textStream) summary += chunk;
            return { doc: doc.file, title: doc.title, summary: summary.trim(), usage: await usage };
          },
          { retry: { maxAttempts: 3, initialDelay: '500ms' }, timeout: '1m' },
        ),
      );
    }

    // 3. Merge: one markdown document with totals.
    const brief = await ctx.step('merge', () => {
      const tokens = summaries.reduce((t, s) => ({ input: t.input + s.usage.inputTokens, output: t.output + s.usage.outputTokens }), { input: 0, output: 0 });
      const body = summaries.map((s, i) => `## ${i + 1}. ${s.title}\n\n${s.summary}\n\n_Source: ${s.doc}_`).join('\n\n');
      const markdown = `# Brief: ${input.topic}\n\n${body}\n\n---\n${summaries.length} documents, ${tokens.input} input + ${tokens.output} output tokens (model ${model.id}).\n`;
      return { markdown, tokens, words: countTokens(markdown) };
    });

    // 4. Review: the task parks (no worker slot held) until an editor decides; the editor may hand
    //    back an edited brief. A rejected brief is not written.
    const review = await ctx.approval('review', {
      payload: { topic: input.topic, words: brief.words, preview: brief.markdown.slice(0, 400) },
      approvers: input.reviewers ?? ['editor'],
    });
    if (!review.approved) return { path: null, documents: summaries.length, tokens: brief.tokens, review };
    const markdown = (review.data as { markdown?: string } | null)?.markdown ?? brief.markdown;

    // 5. Write: atomically (temp file + rename), named by the task, so a repeat overwrites the same
    //    file. The engine refuses this step unless the review is approved on record.
    const path = await ctx.step(
      'write',
      () => {
        mkdirSync(input.outDir, { recursive: true });
        const target = resolve(input.outDir, `brief-${ctx.taskId}.md`);
        writeFileSync(`${target}.tmp`, markdown);
        renameSync(`${target}.tmp`, target);
        return target;
      },
      { requires: 'review' },
    );

    return { path, documents: summaries.length, tokens: brief.tokens, review };
  },
  { version: 1 },
);
