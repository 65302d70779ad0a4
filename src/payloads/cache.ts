/**
 * @module payloads/cache
 * Internal: not part of the public API.
 * Decoded blob contents by hash, least recently used first out, bounded in characters. Blobs never
 * change under their hash, so a cached content is never stale.
 */
export class ContentCache {
  readonly #max: number;
  #chars = 0;
  readonly #map = new Map<string, string>();

  constructor(maxChars: number) {
    this.#max = maxChars;
  }

  get(hash: string): string | undefined {
    const c = this.#map.get(hash);
    if (c !== undefined) {
      this.#map.delete(hash);
      this.#map.set(hash, c);
    }
    return c;
  }

  set(hash: string, content: string): void {
    if (content.length > this.#max / 4 || this.#map.has(hash)) return;
    this.#map.set(hash, content);
    this.#chars += content.length;
    while (this.#chars > this.#max) {
      const [h, c] = this.#map.entries().next().value!;
      this.#map.delete(h);
      this.#chars -= c.length;
    }
  }
}
