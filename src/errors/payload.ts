/**
 * @module errors/payload
 * Errors of the payload store (src/payloads/).
 */
import { StepwiseError } from './base.ts';
import { ERROR_CODES } from './codes.ts';

/** A stored payload cannot be read back (a missing blob, a codec key not configured, bytes that do not authenticate). */
export class PayloadUnreadableError extends StepwiseError {
  constructor(message: string) {
    super(ERROR_CODES.PAYLOAD_UNREADABLE, message, { retryable: false });
    this.name = 'PayloadUnreadableError';
  }
}
