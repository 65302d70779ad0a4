// Array parameters of the PostgreSQL store's batched statements are sent as array literal text
// built by the store (Params.add): every value comes back from the database exactly as it went in.
import { describe, expect, it } from 'vitest';
import { Params, arrayLiteral } from '../src/postgres/sql-text.ts';
import { hasPostgres, sql } from './support/postgres.ts';

const TEXTS = [
  '',
  'plain',
  'with space',
  'a,b',
  '{braces}',
  'quote " inside',
  'back\\slash',
  '\\"both\\"',
  'NULL',
  'null',
  ' lead',
  'trail ',
  'ünïcode 😀',
  'line\nbreak',
  '{"json": [1, "x"]}',
];

describe.skipIf(!(await hasPostgres()))('PostgreSQL array parameters', () => {
  it('round-trips text, bigint, integer and boolean arrays with nulls', async () => {
    const p = new Params();
    const text = p.add([...TEXTS, null, undefined], 'text[]');
    // Without the line break, the array is written as its JSON (see arrayLiteral).
    const jsonPath = TEXTS.filter((t) => !t.includes('\n'));
    const textJson = p.add([...jsonPath, null, undefined], 'text[]');
    const big = p.add([0, -1, 2 ** 53 - 1, null, 1_700_000_000_000], 'bigint[]');
    const int = p.add([1, null, -7], 'integer[]');
    const bool = p.add([true, false, null], 'boolean[]');
    const empty = p.add([], 'text[]');
    const boolText = p.add([true, false], 'text[]');
    const [row] = await sql<{ t: Array<string | null>; tj: Array<string | null>; b: Array<string | null>; i: Array<number | null>; o: Array<boolean | null>; e: string[]; bt: string[] }>(
      `SELECT ${text} AS t, ${textJson} AS tj, ${big}::text[] AS b, ${int} AS i, ${bool} AS o, ${empty} AS e, ${boolText} AS bt`,
      p.values,
    );
    expect(row?.t).toEqual([...TEXTS, null, null]);
    expect(row?.tj).toEqual([...jsonPath, null, null]);
    expect(row?.b).toEqual(['0', '-1', String(2 ** 53 - 1), null, '1700000000000']);
    expect(row?.i).toEqual([1, null, -7]);
    expect(row?.o).toEqual([true, false, null]);
    expect(row?.e).toEqual([]);
    expect(row?.bt).toEqual(['true', 'false']); // as the driver would send them
  });

  it('leaves arrays of anything else to the driver', () => {
    const nested = [[1, 2]];
    expect(arrayLiteral(nested)).toBe(nested);
    expect(arrayLiteral(['a', 1, true, null])).toBe('{"a",1,true,null}');
    expect(arrayLiteral(['say "hi"', 'back\\slash', undefined])).toBe('{"say \\"hi\\"","back\\\\slash",null}');
    // A control character or a lone surrogate, which JSON writes as an escape the array syntax
    // reads differently, sends the array element by element; so does a number that is not finite.
    expect(arrayLiteral(['tab\there', 'q"'])).toBe('{"tab\there","q\\""}');
    expect(arrayLiteral(['\ud800'])).toBe('{"\ud800"}');
    expect(arrayLiteral([1, Number.NaN])).toBe('{1,NaN}');
  });
});
