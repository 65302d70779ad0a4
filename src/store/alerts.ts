/**
 * @module store/alerts
 * The alerts workers raised (see `src/alerts/`), kept for operators to list. The store keeps rows;
 * when to raise one, and at most once per subject and quiet period, is decided above it.
 */

/** One raised alert as stored. `data` is JSON text. */
export interface AlertRow {
  /** A time-ordered id. */
  id: string;
  kind: string;
  subject: string;
  workflow: string | null;
  taskId: string | null;
  message: string;
  data: string;
  raisedAt: number;
  /** The worker that raised it. */
  raisedBy: string;
  /** What makes it the same alert (kind, subject, quiet period): a second insert of it is ignored. */
  dedupe: string;
}

/** Alerts newest first: of these kinds, of a workflow or a task, raised before `before` (an id, for paging). */
export interface AlertQuery {
  kinds?: readonly string[];
  workflow?: string;
  taskId?: string;
  before?: string;
  limit: number;
}

export interface AlertStore {
  insertAlert(row: AlertRow): Promise<void>;
  listAlerts(query: AlertQuery): Promise<AlertRow[]>;
  /** Deletes at most `limit` alerts raised before `before` (ms); returns how many. */
  purgeAlerts(before: number, limit: number): Promise<number>;
}
