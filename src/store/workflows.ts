/**
 * @module store/workflows
 * The workflows (name and version) that workers registered, and which running workers serve
 * which versions now.
 */

export interface WorkflowRegistration {
  name: string;
  version: string;
  at: number;
}

/** A running worker's claim to serve workflow versions (its own and its compatible ones), as of `at`. */
export interface WorkerPresence {
  workerId: string;
  served: ReadonlyArray<{ name: string; version: string }>;
  at: number;
}

/** Registered workflows, and the presence of running workers. */
export interface WorkflowStore {
  registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void>;
  listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>>;
  /**
   * Records (or refreshes) a worker's served versions as seen at `presence.at`, in one write; in the
   * same write, forgets the rows of any worker last seen before `forgetBefore` (dead workers).
   */
  recordPresence(presence: WorkerPresence, forgetBefore: number): Promise<void>;
  /** Forgets a worker's served versions (it stopped). */
  removePresence(workerId: string): Promise<void>;
  /** The versions of `workflow` that some worker seen at or after `seenSince` serves (each once). */
  servedVersions(workflow: string, seenSince: number): Promise<string[]>;
}
