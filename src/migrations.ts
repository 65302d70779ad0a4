/**
 * @module migrations
 * Internal: not part of the public API (the package exports only its index modules).
 * Rules both migrators apply to the migrations already recorded in a database: a breaking
 * migration this version does not know means the schema is too new; a known migration whose text
 * changed after it was applied means the database no longer matches what the code expects.
 */
import { SchemaMismatchError } from './errors.ts';
import type { Migration } from './generated/sql.ts';

export interface AppliedMigration {
  id: number;
  name: string;
  breaking: boolean;
  /** `null` in databases created before checksums were recorded. */
  checksum: string | null;
}

/** Throws SchemaMismatchError if the recorded migrations rule out running this version. */
export function checkApplied(where: string, applied: readonly AppliedMigration[], migrations: readonly Migration[]): void {
  const known = new Map(migrations.map((m) => [m.id, m]));
  for (const a of applied) {
    const m = known.get(a.id);
    if (!m) {
      if (a.breaking) {
        throw new SchemaMismatchError(`${where} has breaking migration ${a.id} (${a.name}), newer than this version of Stepwise understands. Upgrade Stepwise.`);
      }
      continue;
    }
    if (a.checksum !== m.checksum) {
      throw new SchemaMismatchError(
        `${where} has migration ${a.id} (${a.name}) applied from a different text than this version ships (checksum ${a.checksum ?? 'none'}, expected ${m.checksum}): ` +
          'it was created by a pre-release build or the migration was edited after release. Recreate the database, or restore the migration and add a new one.',
      );
    }
  }
}
