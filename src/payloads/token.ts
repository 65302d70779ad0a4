/**
 * @module payloads/token
 * Internal: not part of the public API.
 * What a payload column holds in place of a value the payload store keeps: a JSON string whose
 * text starts with the escape `\u0000sw:` (valid JSON, so the log can embed it where it embeds a
 * payload). `r:<hash>` refers to a blob tree; `e:<base64>` is a small value sealed by the codec.
 * The payload layer never leaves a user's own text holding that escape in a column: such a value
 * is stored as a blob (see payload-store.ts), so a column's token is always the layer's own.
 */

/** The escape every token's text contains, as it appears in JSON text. */
export const MARK = '\\u0000sw:';

export const refToken = (hash: string): string => `"${MARK}r:${hash}"`;
export const sealedToken = (base64: string): string => `"${MARK}e:${base64}"`;

/** The tokens of a JSON text: kind `r` (a blob tree's root hash) or `e` (a sealed value, base64). */
export const TOKEN_PATTERN = /"\\u0000sw:([re]):([A-Za-z0-9_\-+/=]+)"/g;

/**
 * JSON text with the escape of every token spelled otherwise (`\u0000\u0073w:`: the same string
 * once parsed), for text that is not a payload column yet holds user strings (a reviewer's data).
 */
export function escapeMarks(text: string): string {
  return text.includes(MARK) ? text.replaceAll(MARK, '\\u0000\\u0073w:') : text;
}

export function hasMark(text: string): boolean {
  return text.includes(MARK);
}

/** Whether a column text is a reference to a blob tree and nothing else (a payload left to load later). */
export function isRef(text: string | null): text is string {
  return text !== null && text.startsWith(`"${MARK}r:`) && text.endsWith('"') && text.length < 80;
}
