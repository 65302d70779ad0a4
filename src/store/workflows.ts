/**
 * @module store/workflows
 * The workflows (name and version) that workers registered.
 */

export interface WorkflowRegistration {
  name: string;
  version: string;
  at: number;
}

/** Registered workflows. */
export interface WorkflowStore {
  registerWorkflows(workflows: readonly WorkflowRegistration[]): Promise<void>;
  listWorkflows(): Promise<Array<{ name: string; version: string; lastSeenAt: number }>>;
}
