/**
 * @module postgres/refusals
 * Internal: not part of the public API.
 * What a PostgreSQL error with a SQLSTATE means to Stepwise, once connection errors are ruled out
 * (connection.ts): either the database is momentarily unable to do the work (a lost race, a
 * statement timeout, no memory or disk: retry later, STORE_UNAVAILABLE), or it refuses the
 * statement itself, which running it again cannot change (STORE_REFUSED): data exceptions (class
 * 22: a NUL byte in text, a number out of range), integrity violations (class 23), and any other
 * statement it rejects. Errors without a SQLSTATE are not the database's and pass through.
 */
import { StoreRefusedError, StoreUnavailableError } from '../errors.ts';

/** SQLSTATE classes and codes of conditions that pass: retrying later can succeed. */
const TRANSIENT_CLASSES = ['40', '53', '57', '58'];
const TRANSIENT_CODES = new Set(['55P03', '55006', '0A000', 'XX000']);

const CLASS_NAMES: Record<string, string> = {
  '22': 'a value it cannot hold (data exception)',
  '23': 'a constraint (integrity violation)',
  '42': 'the statement (syntax error or access rule violation)',
};

export function isTransientState(code: string): boolean {
  return TRANSIENT_CLASSES.includes(code.slice(0, 2)) || TRANSIENT_CODES.has(code);
}

/** A driver error with a SQLSTATE as a Stepwise error; anything else unchanged. */
export function translateRefusal(e: unknown, description: string): unknown {
  const { code, message } = (e ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return e;
  const text = typeof message === 'string' ? message : String(e);
  if (isTransientState(code)) {
    return new StoreUnavailableError(`PostgreSQL (${description}) could not complete a statement for now (SQLSTATE ${code}): ${text}`, { cause: e });
  }
  const what = CLASS_NAMES[code.slice(0, 2)] ?? 'the statement';
  return new StoreRefusedError(`PostgreSQL (${description}) refused ${what}, SQLSTATE ${code}: ${text}. Retrying cannot fix this.`, { cause: e, dbCode: code });
}
