/**
 * @module client/sse
 * Internal: not part of the public API (the package exports only its index modules).
 * A Server-Sent Events parser over a fetch response body, for clients that must send headers an
 * `EventSource` cannot (a bearer token): it splits the byte stream into messages as the HTML
 * standard's event-stream format says (fields `id`, `event`, `data`, `retry`; comments and unknown
 * fields ignored; a blank line ends a message; multi-line `data` joined with newlines).
 */

/** One message of an event stream. */
export interface SseMessage {
  /** The message's id (a client resumes after it with `Last-Event-ID`); undefined when it had none. */
  id: string | undefined;
  /** The event name (`message` when the stream gave none). */
  event: string;
  data: string;
  /** The reconnection delay the server asked for, in ms, if this message carried one. */
  retry: number | undefined;
}

/** The messages of `body`, in order, until it ends. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let message = fresh();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      // Lines end with \n, \r\n or \r; the last piece may be an incomplete line.
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop() ?? '';
      for (const line of lines) {
        if (line === '') {
          if (message.data !== null) yield { id: message.id, event: message.event ?? 'message', data: message.data, retry: message.retry };
          message = fresh();
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') message.data = message.data === null ? value : `${message.data}\n${value}`;
        else if (field === 'event') message.event = value;
        else if (field === 'id' && !value.includes('\0')) message.id = value;
        else if (field === 'retry' && /^\d+$/.test(value)) message.retry = Number(value);
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function fresh(): { id: string | undefined; event: string | undefined; data: string | null; retry: number | undefined } {
  return { id: undefined, event: undefined, data: null, retry: undefined };
}
