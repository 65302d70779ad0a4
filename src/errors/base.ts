/**
 * @module errors/base
 * The base class every Stepwise error extends (a stable `code`, `retryable`, `cause`), the checks
 * that work on errors rebuilt from JSON (`isStepwiseError`, `isRetryable`, `httpStatusOf`), and
 * `coerceError`, which turns anything thrown into an Error.
 */

import { ERROR_CODES, HTTP_STATUS, type ErrorCode } from './codes.ts';

/** The HTTP status for an error: its code's entry in {@link HTTP_STATUS}, 500 for anything else. */
export function httpStatusOf(e: unknown): number {
  return isStepwiseError(e) ? HTTP_STATUS[e.code] : 500;
}

export interface StepwiseErrorOptions {
  cause?: unknown;
}

/** Base class of every error Stepwise throws. `code` is stable; `message` is for people. */
export class StepwiseError extends Error {
  readonly code: ErrorCode;
  /** Whether a step that failed with this error may be attempted again. */
  readonly retryable: boolean;
  constructor(code: ErrorCode, message: string, options: StepwiseErrorOptions & { retryable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StepwiseError';
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/** True when `e` is a Stepwise error, optionally with the given code; works on rebuilt errors too. */
export function isStepwiseError(e: unknown, code?: ErrorCode): e is StepwiseError {
  if (typeof e !== 'object' || e === null) return false;
  const c = (e as { code?: unknown }).code;
  if (typeof c !== 'string' || !(Object.values(ERROR_CODES) as string[]).includes(c)) return false;
  return code === undefined || c === code;
}

/** Whether a step that threw `e` may be attempted again (unless its retry policy says otherwise). */
export function isRetryable(e: unknown): boolean {
  if (typeof e === 'object' && e !== null) {
    const r = (e as { retryable?: unknown }).retryable;
    if (typeof r === 'boolean') return r;
  }
  return true;
}

/** Turns anything thrown into an Error, keeping the original as `cause` when it was not one. */
export function coerceError(e: unknown): Error {
  if (e instanceof Error) return e;
  if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') {
    const err = new Error((e as { message: string }).message, { cause: e });
    const name = (e as { name?: unknown }).name;
    if (typeof name === 'string') err.name = name;
    return err;
  }
  return new Error(typeof e === 'string' ? e : `Non-error thrown: ${safeString(e)}`, { cause: e });
}

/** A thrown value's message for another error's message (its JSON, or `String`, when it is not an Error). */
export function describeThrown(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string') {
    return (e as { message: string }).message;
  }
  return safeString(e);
}

function safeString(v: unknown): string {
  try {
    return typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v));
  } catch {
    return String(v);
  }
}
