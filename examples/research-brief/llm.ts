/**
 * A simulated streaming language model, behind the same shape a real provider adapter would
 * have (text arrives as a stream of chunks; token usage arrives when the stream ends; an
 * AbortSignal stops the stream mid-flight). It writes an extractive summary word by word at a
 * fixed pace, so the example can be interrupted in the middle of a "model call".
 *
 * To use a real model, implement `LanguageModel` with a provider SDK, e.g. with the Vercel AI SDK:
 *   streamText({ model, system, prompt, abortSignal: signal, headers: { 'Idempotency-Key': idempotencyKey } })
 * returns `{ textStream, usage }` of the same shape.
 */
import { appendFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

export interface StreamRequest {
  system?: string;
  prompt: string;
  signal?: AbortSignal;
  /** Sent to the provider so that a repeated request is recognised (the step's key). */
  idempotencyKey?: string;
}

export interface StreamResult {
  textStream: AsyncIterable<string>;
  usage: Promise<Usage>;
}

export interface LanguageModel {
  readonly id: string;
  streamText(request: StreamRequest): StreamResult;
}

/** Rough tokenizer: words and punctuation marks. */
export function countTokens(text: string): number {
  return text.match(/[\p{L}\p{N}']+|[^\s\p{L}\p{N}]/gu)?.length ?? 0;
}

const STOP = new Set(
  'a an the and or of to in on is are be by for with that this it as at from not but so than then their its each every can into only after before when which what who there these those was were has have had will would should must does do'.split(
    ' ',
  ),
);

/** Picks the `n` sentences whose words are most frequent in the text, in their original order. */
function extractiveSummary(text: string, n: number): string {
  const body = text.replace(/^#.*$/gm, '').trim();
  const sentences = body.split(/(?<=[.!?])\s+/).filter((s) => s.length > 20);
  const freq = new Map<string, number>();
  for (const w of body.toLowerCase().match(/[a-z']+/g) ?? []) if (!STOP.has(w)) freq.set(w, (freq.get(w) ?? 0) + 1);
  const score = (s: string): number => {
    const words = (s.toLowerCase().match(/[a-z']+/g) ?? []).filter((w) => !STOP.has(w));
    return words.reduce((sum, w) => sum + (freq.get(w) ?? 0), 0) / Math.max(4, words.length);
  };
  const top = sentences
    .map((s, i) => ({ s, i, score: score(s) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, n)
    .sort((a, b) => a.i - b.i);
  return top.map((t) => t.s).join(' ');
}

export interface SimulatedModelOptions {
  /** Output pace. @defaultValue 60 */
  tokensPerSecond?: number;
  /** Appends one JSON line per call (who called, with which idempotency key) to this file. */
  callLog?: string;
}

export function createSimulatedModel(options: SimulatedModelOptions = {}): LanguageModel {
  const delayMs = 1000 / (options.tokensPerSecond ?? 60);
  return {
    id: 'simulated-extractive-1',
    streamText({ system = '', prompt, signal, idempotencyKey }) {
      if (options.callLog) {
        mkdirSync(dirname(options.callLog), { recursive: true });
        appendFileSync(options.callLog, `${JSON.stringify({ at: Date.now(), pid: process.pid, idempotencyKey })}\n`);
      }
      const document = prompt.split('\n---\n')[1] ?? prompt;
      const output = extractiveSummary(document, 2);
      const pieces = output.match(/\S+\s*/g) ?? [];
      let resolveUsage!: (u: Usage) => void;
      let rejectUsage!: (e: unknown) => void;
      const usage = new Promise<Usage>((res, rej) => {
        resolveUsage = res;
        rejectUsage = rej;
      });
      usage.catch(() => undefined);
      async function* stream(): AsyncGenerator<string> {
        try {
          for (const piece of pieces) {
            await new Promise<void>((resolve, reject) => {
              if (signal?.aborted) return reject(signal.reason);
              const t = setTimeout(resolve, delayMs);
              signal?.addEventListener(
                'abort',
                () => {
                  clearTimeout(t);
                  reject(signal.reason);
                },
                { once: true },
              );
            });
            yield piece;
          }
          resolveUsage({ inputTokens: countTokens(system) + countTokens(prompt), outputTokens: countTokens(output) });
        } catch (e) {
          rejectUsage(e);
          throw e;
        }
      }
      return { textStream: stream(), usage };
    },
  };
}
