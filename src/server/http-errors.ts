/**
 * @module server/http-errors
 * One error handler for the whole API: a Stepwise error answers with its code's status from
 * `HTTP_STATUS` (through `httpStatusOf`) and a body `{ error: { code, message, … } }` that keeps
 * the fields a client acts on (the legal actions of an illegal transition, the recorded value of a
 * conflict, the limit of a payload that is too large). Anything else is a 500 whose message says
 * nothing of the internals; it is logged by the server.
 */
import { httpStatusOf, isStepwiseError, type ErrorCode } from '../index.ts';

export interface ErrorBody {
  error: {
    code: ErrorCode | 'UNAUTHORIZED' | 'NOT_FOUND' | 'METHOD_NOT_ALLOWED' | 'INTERNAL';
    message: string;
    legalEvents?: readonly string[];
    status?: string;
    recorded?: unknown;
    limitBytes?: number;
    maxDepth?: number;
    requiredRoles?: readonly string[];
  };
}

/** An HTTP-only refusal that has no engine code (401, unknown route). */
export class HttpRefusal extends Error {
  readonly status: number;
  readonly code: ErrorBody['error']['code'];
  readonly extra: Partial<ErrorBody['error']>;
  constructor(status: number, code: ErrorBody['error']['code'], message: string, extra: Partial<ErrorBody['error']> = {}) {
    super(message);
    this.name = 'HttpRefusal';
    this.status = status;
    this.code = code;
    this.extra = extra;
  }
}

/** The status and body for anything a handler threw. */
export function errorResponse(e: unknown): { status: number; body: ErrorBody } {
  if (e instanceof HttpRefusal) return { status: e.status, body: { error: { code: e.code, message: e.message, ...e.extra } } };
  if (isStepwiseError(e)) {
    const x = e as unknown as Record<string, unknown>;
    const body: ErrorBody = { error: { code: e.code, message: e.message } };
    if (Array.isArray(x.legalEvents)) body.error.legalEvents = x.legalEvents as string[];
    if (typeof x.status === 'string') body.error.status = x.status;
    if (x.recorded !== undefined) body.error.recorded = x.recorded;
    if (typeof x.limitBytes === 'number') body.error.limitBytes = x.limitBytes;
    return { status: httpStatusOf(e), body };
  }
  return { status: 500, body: { error: { code: 'INTERNAL', message: 'The server met an unexpected error; it has been logged.' } } };
}
