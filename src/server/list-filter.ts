/**
 * @module server/list-filter
 * A validated filter of a task listing (the HTTP query, a bulk action's body, an MCP tool's
 * arguments) as `engine.list` takes it: absent fields left out, times given as ISO dates read as
 * ms, an empty tag set no filter.
 */
import type { ListOptions, TaskStatus } from '../index.ts';

export interface ListFilterFields {
  status?: TaskStatus | TaskStatus[] | undefined;
  workflow?: string | undefined;
  parent?: string | undefined;
  tags?: Record<string, string> | undefined;
  createdAfter?: number | string | undefined;
  createdBefore?: number | string | undefined;
  failedWith?: string | undefined;
  text?: string | undefined;
}

const ms = (t: number | string): number => (typeof t === 'number' ? t : Date.parse(t));

export function listFilter(f: ListFilterFields): Omit<ListOptions, 'limit' | 'cursor'> {
  return {
    ...(f.status !== undefined ? { status: f.status } : {}),
    ...(f.workflow !== undefined ? { workflow: f.workflow } : {}),
    ...(f.parent !== undefined ? { parent: f.parent } : {}),
    ...(f.tags !== undefined && Object.keys(f.tags).length ? { tags: f.tags } : {}),
    ...(f.createdAfter !== undefined ? { createdAfter: ms(f.createdAfter) } : {}),
    ...(f.createdBefore !== undefined ? { createdBefore: ms(f.createdBefore) } : {}),
    ...(f.failedWith !== undefined ? { failedWith: f.failedWith } : {}),
    ...(f.text !== undefined ? { text: f.text } : {}),
  };
}

/** The task list's query string (`ListQuery`, statuses as a comma list) as `engine.list`'s filter with its cursor. */
export function queryFilter(query: Omit<ListFilterFields, 'status'> & { status?: readonly string[] | undefined; cursor?: string | undefined }): Omit<ListOptions, 'limit'> {
  return {
    ...listFilter({ ...query, status: query.status?.length ? (query.status as TaskStatus[]) : undefined }),
    ...(query.cursor !== undefined ? { cursor: query.cursor } : {}),
  };
}
