import { describe, expect, it } from 'vitest';
import {
  ConflictError,
  ERROR_CODES,
  ForbiddenError,
  HTTP_STATUS,
  IllegalTransitionError,
  InvalidArgumentError,
  StoreUnavailableError,
  TaskNotFoundError,
  WorkflowNotFoundError,
  httpStatusOf,
  isStepwiseError,
} from '../src/index.ts';
import { decodeError, deserializeError, encodeError } from '../src/serialize.ts';

describe('error codes have one HTTP meaning', () => {
  it('gives every code a status in the 4xx or 5xx range', () => {
    for (const code of Object.values(ERROR_CODES)) {
      const status = HTTP_STATUS[code];
      expect(status, code).toBeGreaterThanOrEqual(400);
      expect(status, code).toBeLessThan(600);
    }
    expect(Object.keys(HTTP_STATUS).sort()).toEqual(Object.values(ERROR_CODES).sort());
  });

  it('maps bad input to 400, unknown ids to 404, refusals to 403, contradictions to 409, outages to 503', () => {
    expect(httpStatusOf(new InvalidArgumentError('bad'))).toBe(400);
    expect(httpStatusOf(new TaskNotFoundError('t1'))).toBe(404);
    expect(httpStatusOf(new WorkflowNotFoundError('w', []))).toBe(404);
    expect(httpStatusOf(new ForbiddenError('carol is not an approver of review', { actor: 'carol' }))).toBe(403);
    expect(httpStatusOf(new ConflictError('already approved by alice', { recorded: { approve: true } }))).toBe(409);
    expect(httpStatusOf(new IllegalTransitionError('succeeded', 'cancel', [], 't1'))).toBe(409);
    expect(httpStatusOf(new StoreUnavailableError('down'))).toBe(503);
    expect(httpStatusOf(new Error('a bug'))).toBe(500);
    expect(httpStatusOf('not even an error')).toBe(500);
  });

  it('keeps the mapping for an error rebuilt from JSON, where instanceof no longer holds', () => {
    const rebuilt = deserializeError(decodeError(encodeError(new ForbiddenError('no', { actor: 'mallory' }))));
    expect(rebuilt).not.toBeInstanceOf(ForbiddenError);
    expect(isStepwiseError(rebuilt, 'FORBIDDEN')).toBe(true);
    expect(httpStatusOf(rebuilt)).toBe(403);
  });

  it('names the recorded state in a conflict and the actor in a refusal', () => {
    const c = new ConflictError('x', { recorded: { approve: false, by: 'bob' } });
    expect(c.code).toBe('CONFLICT');
    expect(c.recorded).toEqual({ approve: false, by: 'bob' });
    const f = new ForbiddenError('y', { actor: 'carol' });
    expect(f.code).toBe('FORBIDDEN');
    expect(f.actor).toBe('carol');
    expect(f.name).toBe('ForbiddenError');
  });
});
