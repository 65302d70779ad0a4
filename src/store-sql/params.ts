/**
 * @module store-sql/params
 * Internal: not part of the public API.
 * What a dialect lends the dialect-free statement builders of `store-sql/`: placeholders (SQLite's
 * `?`, PostgreSQL's typed `$n::type`) with the values they bind, in the order they appear, and
 * the two tests whose text differs between the dialects (membership in a list, and in a JSON
 * array held as text).
 */

/** The SQL type of a bound value (PostgreSQL casts to it; SQLite binds the value as it is). */
export type SqlType = 'text' | 'integer' | 'bigint' | 'boolean';

export interface SqlParams {
  /** The values bound so far, in placeholder order. */
  readonly values: unknown[];
  /** A placeholder for the scalar `value` of type `type`. */
  add(value: unknown, type: SqlType): string;
  /** The test that `column` is one of `values` (bound as one parameter). */
  anyOf(column: string, values: readonly unknown[], type: SqlType): string;
  /** The test that the JSON array of strings held as text in `column` contains `value`. */
  jsonHas(column: string, value: string): string;
  /** The text at `path` (keys, outermost first) of the JSON object held as text in `column` (NULL if absent). */
  jsonText(column: string, path: readonly string[]): string;
}
