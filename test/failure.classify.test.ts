import { RetryError, APICallError } from 'ai';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { NonRetryableError, RetryableError, StepTimeoutError } from '../src/index.ts';
import { classifyDefault, classifyError, retryAfterMsOf } from '../src/failure/classify.ts';

const NOW = Date.UTC(2030, 0, 1);

describe('the default error classifier', () => {
  it('reads Retry-After as seconds or an HTTP date, and retry-after-ms, from Headers or a plain record', () => {
    expect(retryAfterMsOf(new Headers({ 'Retry-After': '1' }), NOW)).toBe(1000);
    expect(retryAfterMsOf({ 'Retry-After': '2.5' }, NOW)).toBe(2500);
    expect(retryAfterMsOf({ 'retry-after': new Date(NOW + 30_000).toUTCString() }, NOW)).toBe(30_000);
    expect(retryAfterMsOf(new Headers({ 'retry-after-ms': '150', 'retry-after': '9' }), NOW)).toBe(150);
    expect(retryAfterMsOf({ 'retry-after': 'soon' }, NOW)).toBeUndefined();
    expect(retryAfterMsOf(undefined, NOW)).toBeUndefined();
  });

  it('classifies HTTP statuses: 408, 409, 429 and 5xx transient; 400, 401, 403, 404, 422 permanent', () => {
    const kind = (status: number): string => classifyDefault(Object.assign(new Error('x'), { status }), NOW).kind;
    expect([408, 409, 429, 500, 502, 503, 504].map(kind)).toEqual(Array(7).fill('transient'));
    expect([400, 401, 403, 404, 422].map(kind)).toEqual(Array(5).fill('permanent'));
  });

  it("recognises the openai client's errors, with their Headers", () => {
    const rate = OpenAI.APIError.generate(429, { error: { message: 'slow down' } }, 'slow down', new Headers({ 'retry-after': '3' }));
    expect(classifyDefault(rate, NOW)).toMatchObject({ kind: 'transient', status: 429, retryAfterMs: 3000 });
    const bad = OpenAI.APIError.generate(400, { message: 'too long', code: 'context_length_exceeded' }, 'too long', new Headers());
    expect(classifyDefault(bad, NOW)).toMatchObject({ kind: 'permanent', status: 400 });
    expect(classifyDefault(new OpenAI.APIConnectionError({ message: 'socket hang up' }), NOW)).toMatchObject({ kind: 'transient' });
    expect(classifyDefault(new OpenAI.APIConnectionTimeoutError(), NOW)).toMatchObject({ kind: 'transient' });
  });

  it("follows the AI SDK's isRetryable, also inside its RetryError", () => {
    const fatal = new APICallError({ message: 'bad', url: 'u', requestBodyValues: {}, statusCode: 401, isRetryable: false });
    expect(classifyDefault(fatal, NOW)).toMatchObject({ kind: 'permanent', status: 401 });
    const wrapped = new RetryError({ message: 'gave up', reason: 'maxRetriesExceeded', errors: [fatal] });
    expect(classifyDefault(wrapped, NOW).kind).toBe('permanent');
  });

  it("honours the errors' own retryable flag and RetryableError's retryAfterMs; unknown errors stay retryable", () => {
    expect(classifyDefault(new NonRetryableError('no'), NOW).kind).toBe('permanent');
    expect(classifyDefault(new RetryableError('later', { retryAfterMs: 40 }), NOW)).toMatchObject({ kind: 'transient', retryAfterMs: 40 });
    expect(classifyDefault(new StepTimeoutError('s', 10), NOW).kind).toBe('transient');
    expect(classifyDefault(new Error('what?'), NOW)).toMatchObject({ kind: 'transient', reason: 'unknown error' });
    expect(classifyDefault('a string', NOW).kind).toBe('transient');
  });

  it('lets a hook override, except a NonRetryableError; refuses a nonsense answer', () => {
    const e = Object.assign(new Error('x'), { status: 503 });
    expect(classifyError(e, () => 'permanent', NOW)).toMatchObject({ kind: 'permanent', status: 503, reason: 'classify hook' });
    expect(classifyError(e, () => ({ kind: 'transient', retryAfterMs: 7 }), NOW)).toMatchObject({ kind: 'transient', retryAfterMs: 7 });
    expect(classifyError(e, () => undefined, NOW).reason).toBe('http 503');
    expect(classifyError(new NonRetryableError('no'), () => 'transient', NOW).kind).toBe('permanent');
    expect(() => classifyError(e, () => 'maybe' as never, NOW)).toThrow(/classify\(\) returned "maybe"/);
  });
});
