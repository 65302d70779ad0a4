/**
 * @module client/options
 * Refuses an options object with a key the client does not know (a mistyped `reconnectMs` would
 * otherwise be ignored silently). The client runs in browsers and has no engine errors: a
 * TypeError naming the unknown and the known keys.
 */

export function refuseUnknownOptions(options: object | undefined, known: readonly string[], where: string): void {
  if (options === undefined) return;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) throw new TypeError(`${where}: options must be an object.`);
  const unknown = Object.keys(options).filter((k) => !known.includes(k));
  if (unknown.length) throw new TypeError(`${where}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (known: ${known.join(', ')}).`);
}
