/**
 * @module payloads/tree
 * Internal: not part of the public API.
 * A value as a tree of content-addressed blobs, so that a value sharing parts with an earlier one
 * (the usual agent loop: turn n+1's message list is turn n's plus a few messages) stores only
 * what is new. Each blob's content is a tag and JSON:
 * - `j<json>`: a whole value;
 * - `a[<entry>,…]`: consecutive elements of an array, each entry `"<hash>"` (an element kept as its
 *   own blob) or `[<json>]` (a small element, inline);
 * - `t["<hash>",…]`: consecutive nodes of an array's tree (an `a` or `t` each), for long arrays;
 * - `o[[<key>,<entry>],…]`: an object with a large member, member by member.
 * An array's elements are cut into nodes where an entry's own hash says so (one entry in `fanout`,
 * on average, ends a node), not by position: appending to an array changes only the last node of
 * each level, and every other node keeps its address, so it is stored once. A 300-turn transcript
 * so stores each message once plus, per turn, a few short nodes of addresses.
 * Rebuilding a value's JSON text reads its tree a level at a time (one batch read per level).
 */

export interface TreeShape {
  /** An element or member whose JSON is shorter than this stays inline in its node. */
  inlineMax: number;
  /** One entry in `fanout` ends a node, on average. */
  fanout: number;
  /** A node never holds more entries than this. */
  maxNode: number;
  /** An object is split member by member when one of its members' JSON is at least this long. */
  splitObjectAt: number;
}

export const DEFAULT_SHAPE: TreeShape = { inlineMax: 256, fanout: 8, maxNode: 64, splitObjectAt: 1024 };

const encoder = new TextEncoder();

/** Builds the tree of one or more values, collecting its blobs (content bytes by hash). */
export class TreeBuilder {
  readonly blobs = new Map<string, Uint8Array>();
  readonly #address: (content: Uint8Array) => string;
  readonly #shape: TreeShape;

  constructor(address: (content: Uint8Array) => string, shape: TreeShape = DEFAULT_SHAPE) {
    this.#address = address;
    this.#shape = shape;
  }

  /** The root hash of `value`'s tree; `text` is its JSON. */
  root(value: unknown, text: string): string {
    if (Array.isArray(value) && value.length > 1) return this.#array(value);
    if (isObject(value) && this.#splits(value)) return this.#object(value);
    return this.#put(`j${text}`);
  }

  #entry(value: unknown): string {
    const text = JSON.stringify(value);
    if (text.length < this.#shape.inlineMax) return `[${text}]`;
    return JSON.stringify(this.root(value, text));
  }

  #array(items: readonly unknown[]): string {
    let level = this.#nodes(
      items.map((item) => this.#entry(item)),
      'a',
    );
    while (level.length > 1)
      level = this.#nodes(
        level.map((h) => JSON.stringify(h)),
        't',
      );
    return level[0]!;
  }

  /** Cuts entries into nodes by their content and stores each; returns the nodes' hashes in order. */
  #nodes(entries: readonly string[], tag: 'a' | 't'): string[] {
    const out: string[] = [];
    let start = 0;
    for (let i = 0; i < entries.length; i++) {
      const last = i === entries.length - 1;
      if (last || i + 1 - start >= this.#shape.maxNode || fnv1a(entries[i]!) % this.#shape.fanout === 0) {
        out.push(this.#put(`${tag}[${entries.slice(start, i + 1).join(',')}]`));
        start = i + 1;
      }
    }
    return out;
  }

  #splits(value: Record<string, unknown>): boolean {
    for (const key in value) {
      const v = value[key];
      if (typeof v === 'object' && v !== null && JSON.stringify(v).length >= this.#shape.splitObjectAt) return true;
    }
    return false;
  }

  #object(value: Record<string, unknown>): string {
    const pairs: string[] = [];
    for (const key in value) {
      if (!Object.hasOwn(value, key) || value[key] === undefined) continue;
      pairs.push(`[${JSON.stringify(key)},${this.#entry(value[key])}]`);
    }
    return this.#put(`o[${pairs.join(',')}]`);
  }

  #put(content: string): string {
    const bytes = encoder.encode(content);
    const hash = this.#address(bytes);
    if (!this.blobs.has(hash)) this.blobs.set(hash, bytes);
    return hash;
  }
}

/** The hashes a node's content refers to. */
export function childrenOf(content: string): string[] {
  const tag = content[0];
  if (tag === 'j') return [];
  const body = JSON.parse(content.slice(1)) as unknown[];
  const out: string[] = [];
  for (const item of body) {
    const entry = tag === 'o' ? (item as [string, unknown])[1] : item;
    if (typeof entry === 'string') out.push(entry);
  }
  return out;
}

/** Texts of nodes built before (a subtree's text never changes under its hash). */
export interface BuiltTexts {
  get(hash: string): string | undefined;
  set(hash: string, text: string): void;
}

/**
 * The JSON text of the value whose tree's root is `root`; `contents` holds every node of it that
 * `built` does not. A transcript's next turn shares every node but its last ones with the turn
 * before: with `built`, only those are built again.
 */
export function build(root: string, contents: ReadonlyMap<string, string>, built?: BuiltTexts): string {
  const memo = new Map<string, string>();
  const text = (hash: string): string => {
    const known = memo.get(hash) ?? (hash === root ? undefined : built?.get(hash));
    if (known !== undefined) return known;
    const content = contents.get(hash);
    if (content === undefined) throw new Error(`payload tree: node ${hash} was not read`);
    let out: string;
    switch (content[0]) {
      case 'j':
        out = content.slice(1);
        break;
      case 'a':
        out = `[${(JSON.parse(content.slice(1)) as unknown[]).map(entryText).join(',')}]`;
        break;
      case 't':
        out = `[${(JSON.parse(content.slice(1)) as string[])
          .map((h) => text(h).slice(1, -1))
          .filter((s) => s.length > 0)
          .join(',')}]`;
        break;
      case 'o':
        out = `{${(JSON.parse(content.slice(1)) as Array<[string, unknown]>).map(([k, e]) => `${JSON.stringify(k)}:${entryText(e)}`).join(',')}}`;
        break;
      default:
        throw new Error(`payload tree: node ${hash} has an unknown tag ${JSON.stringify(content[0])}`);
    }
    memo.set(hash, out);
    if (hash !== root) built?.set(hash, out);
    return out;
  };
  const entryText = (e: unknown): string => (typeof e === 'string' ? text(e) : JSON.stringify((e as unknown[])[0]));
  return text(root);
}

/** 32-bit FNV-1a of a string's UTF-16 code units: cheap, stable, and enough to cut nodes by content. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
