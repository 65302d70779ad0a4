import { describe, expect, it } from 'vitest';
import { checkSentPayload, encodeArgument, encodeWithin } from '../src/limits.ts';
import { KEY_MAX, checkKey } from '../src/text-rules.ts';

describe('the one encode-and-size check of what a task stores', () => {
  it('returns the JSON text of a value within its limit, and null for undefined', () => {
    expect(encodeWithin({ a: 1 }, 'The output of step "s"', 100, 'outputBytes')).toBe('{"a":1}');
    expect(encodeWithin(undefined, 'The output of step "s"', 100, 'outputBytes')).toBeNull();
  });

  it('refuses a value over its limit with PAYLOAD_TOO_LARGE naming the value, its size and the option to raise', () => {
    const big = 'x'.repeat(200);
    expect(() => encodeWithin(big, () => 'The output of step "s"', 100, 'outputBytes')).toThrow(
      expect.objectContaining({
        code: 'PAYLOAD_TOO_LARGE',
        message: expect.stringMatching(/^The output of step "s" is 202 bytes as JSON, over the limit of 100 bytes.*limits\.outputBytes\./),
      }),
    );
  });

  it('counts bytes in UTF-8, not characters', () => {
    // 40 characters of 3 bytes each: 120 bytes (+2 quotes), over 100 though only 42 characters long.
    expect(() => encodeArgument('€'.repeat(40), 'The payload of signal "go"', 100, 'payloadBytes')).toThrow(expect.objectContaining({ code: 'PAYLOAD_TOO_LARGE' }));
  });

  it('refuses a value JSON cannot hold as NOT_SERIALIZABLE inside a run, and as INVALID_ARGUMENT from a caller', () => {
    expect(() => encodeWithin(() => 1, 'The output of step "s"', 100, 'outputBytes')).toThrow(expect.objectContaining({ code: 'NOT_SERIALIZABLE' }));
    expect(() => encodeArgument(10n, 'The payload of signal "go"', 100, 'payloadBytes')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('The payload of signal "go"') }),
    );
  });
});

describe('the one check of a payload against its declared schema', () => {
  const schema = {
    parse(v: unknown): unknown {
      if (typeof v !== 'number') throw new Error('expected a number');
      return v;
    },
  };

  it('passes a payload the schema takes, and any payload without a schema', () => {
    expect(() => checkSentPayload(schema, { id: 't1', workflow: 'wf' }, 'signal "go"', 3)).not.toThrow();
    expect(() => checkSentPayload(undefined, { id: 't1', workflow: 'wf' }, 'signal "go"', 'anything')).not.toThrow();
  });

  it('refuses a payload the schema refuses with INVALID_INPUT naming what was sent, to which task, and why', () => {
    expect(() => checkSentPayload(schema, { id: 't1', workflow: 'wf' }, 'event "approve"', 'x')).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringContaining('the payload of event "approve" to task t1 fails its schema, and was not sent: expected a number') }),
    );
  });
});

describe('the one idempotency-key check', () => {
  it('takes a key of 1 to KEY_MAX characters', () => {
    expect(checkKey('k'.repeat(KEY_MAX), 'The idempotencyKey')).toHaveLength(KEY_MAX);
  });

  it('refuses an empty, too long, non-string or unstorable key with INVALID_ARGUMENT naming it', () => {
    for (const bad of ['', 'k'.repeat(KEY_MAX + 1), 42, 'a\u0000b']) {
      expect(() => checkKey(bad, 'The idempotencyKey')).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/^The idempotencyKey /) }));
    }
  });
});
