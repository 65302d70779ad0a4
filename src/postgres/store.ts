export class PostgresStore { constructor(_u: string, _o?: unknown) { throw new Error('PostgreSQL store: not built yet'); } }
