/**
 * @module postgres/row-objects
 * Internal: not part of the public API.
 * Rows as plain objects of one fixed shape per result layout. The driver's own objects are copies of
 * a null-prototype template, which V8 keeps as dictionaries: a wide row (a task has some thirty
 * columns) costs several times the memory of an object with its fields in place, and every field
 * read is a hash lookup. Statements run with `rowMode: 'array'` instead, and each row's array
 * becomes an object literal built by a function compiled once per list of column names.
 */
import type { FieldDef } from 'pg';

export type Raw = Record<string, unknown>;
type Build = (values: readonly unknown[]) => Raw;

/** Result layouts seen so far: a store runs a bounded set of statements, whose layouts repeat. */
const builders = new Map<string, Build>();
const BUILDERS_MAX = 1000;

/** The objects of `rows` (arrays in the order of `fields`), with each column under its name. */
export function rowObjects(fields: readonly FieldDef[], rows: ReadonlyArray<readonly unknown[]>): Raw[] {
  if (!rows.length) return [];
  const build = builderOf(fields);
  const out = new Array<Raw>(rows.length);
  for (let i = 0; i < rows.length; i++) out[i] = build(rows[i] as readonly unknown[]);
  return out;
}

function builderOf(fields: readonly FieldDef[]): Build {
  let key = '';
  for (const f of fields) key += `${f.name}\u0000`;
  let build = builders.get(key);
  if (build === undefined) {
    build = compile(fields.map((f) => f.name));
    if (builders.size < BUILDERS_MAX) builders.set(key, build);
  }
  return build;
}

/** A function from a row's array to its object; a name that repeats keeps its last column, as with the driver's objects. */
function compile(names: readonly string[]): Build {
  const at = new Map<string, number>();
  names.forEach((name, i) => at.set(name, i));
  const fallback: Build = (values) => {
    const row: Raw = {};
    for (const [name, i] of at) Object.defineProperty(row, name, { value: values[i], writable: true, enumerable: true, configurable: true });
    return row;
  };
  // `__proto__` in a literal would set the prototype rather than a field.
  if (at.has('__proto__')) return fallback;
  try {
    // Names are quoted with JSON.stringify: whatever a column is called, it is a string literal.
    const fields = [...at].map(([name, i]) => `${JSON.stringify(name)}: v[${i}]`);
    return new Function(`return function row(v) { return { ${fields.join(', ')} }; };`)() as Build;
  } catch {
    // A process that forbids code generation from strings (--disallow-code-generation-from-strings).
    return fallback;
  }
}
