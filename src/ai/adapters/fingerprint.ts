/**
 * @module ai/adapters/fingerprint
 * Internal: not part of the public API.
 * The fingerprint of a model call: a hash of what decides its answer — the model id, the prompt or
 * messages, the tools, the output schema and the settings (temperature, token limits…) — written
 * with the call's recorded result. A replay that would send a different request (a prompt edited,
 * a model swapped, a tool added since) sees another fingerprint: the recorded answer came from
 * code that has changed (drift). Functions (tool `execute`, callbacks), signals and headers do not
 * count; object keys count in sorted order, so the same request always gives the same hash.
 */
import { createHash } from 'node:crypto';

/** How deep a request is read (a schema's definition is nested; deeper parts count by their place only). */
const MAX_DEPTH = 24;
/** Keys of a call's options that do not decide its answer. */
const IGNORED = new Set(['abortSignal', 'signal', 'headers', 'onError', 'onChunk', 'onFinish', 'onStepFinish', 'experimental_telemetry', 'providerOptions']);

function canonical(v: unknown, depth: number, seen: Set<object>): unknown {
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (typeof v === 'bigint') return String(v);
  if (typeof v !== 'object') return undefined; // functions, symbols, undefined
  if (v instanceof Date) return v.toISOString();
  if (depth > MAX_DEPTH || seen.has(v)) return '…';
  seen.add(v);
  try {
    if (Array.isArray(v)) return v.map((x) => canonical(x, depth + 1, seen) ?? null);
    const o = v as Record<string, unknown>;
    // A Zod schema counts by its definition; an AI SDK schema (`jsonSchema(…)`) by its JSON Schema.
    if (typeof o._zod === 'object' && o._zod !== null) return { zod: canonical((o._zod as { def?: unknown }).def, depth + 1, seen) };
    if (typeof o.jsonSchema === 'object' && o.jsonSchema !== null) return { jsonSchema: canonical(o.jsonSchema, depth + 1, seen) };
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(o).sort()) {
      if (IGNORED.has(key)) continue;
      const c = canonical(o[key], depth + 1, seen);
      if (c !== undefined) out[key] = c;
    }
    return out;
  } finally {
    seen.delete(v);
  }
}

/** The fingerprint of a call of `model` with `request`: 16 hex characters of a SHA-256. */
export function fingerprintOf(model: string, request: unknown): string {
  const text = JSON.stringify(canonical({ model, request }, 0, new Set()));
  return createHash('sha256').update(text).digest('hex').slice(0, 16);
}
