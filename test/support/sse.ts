// Reading Server-Sent Events in tests: a parser for complete messages, and a reader of one of the
// server's streams (through app.request, no port) until a condition holds or the stream ends.
import { expect } from 'vitest';
import type { StepwiseServer } from '../../src/server/index.ts';
import { tokenOf } from './server.ts';

export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
}

/** Parses complete SSE messages out of `text`; returns them and the unparsed rest. */
export function parse(text: string): { messages: SseMessage[]; rest: string } {
  const messages: SseMessage[] = [];
  const blocks = text.split('\n\n');
  const rest = blocks.pop() ?? '';
  for (const block of blocks) {
    const m: SseMessage = {};
    for (const line of block.split('\n')) {
      const at = line.indexOf(':');
      if (at <= 0) continue;
      const field = line.slice(0, at);
      const value = line.slice(at + 1).replace(/^ /, '');
      if (field === 'id' || field === 'event' || field === 'data') m[field] = value;
    }
    if (m.event || m.data) messages.push(m);
  }
  return { messages, rest };
}

/** Opens the stream and reads messages until `stop` says so (or the stream ends); the connection is then dropped. */
export async function readStream(server: StepwiseServer, path: string, stop: (seen: SseMessage[]) => boolean, headers: Record<string, string> = {}): Promise<SseMessage[]> {
  const abort = new AbortController();
  const res = await server.app.request(`http://localhost${path}`, { headers: { authorization: `Bearer ${tokenOf('vera')}`, ...headers }, signal: abort.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const seen: SseMessage[] = [];
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return seen;
      const { messages, rest } = parse(buffer + decoder.decode(value, { stream: true }));
      buffer = rest;
      for (const m of messages) {
        seen.push(m);
        if (stop(seen)) return seen;
      }
    }
  } finally {
    abort.abort();
    await reader.cancel().catch(() => undefined);
  }
}
