/**
 * @module server/summaries
 * What lists and command answers carry of a task: its summary, with every large value (input,
 * output, error, wait, the per-step usage) over `valueBytes` of JSON replaced by the start of its
 * JSON text and "…", its name in `truncated` (`usage.steps` for the per-step usage: the totals
 * stay), and `url` for the whole task (`GET /api/tasks/:id`).
 * A page of the list stops before its body would pass `bodyBytes` (always with at least one task),
 * and answers the cursor of its last task; the engine is read in chunks sized so that the values
 * loaded at once stay near `bodyBytes` too. So whatever the tasks hold, one request makes the
 * server hold and send a bounded amount.
 */
import type { ApprovalInfo, Engine, ListOptions, TaskSummary } from '../index.ts';

export interface SummaryLimits {
  /** The largest JSON of one value kept whole in a summary. */
  valueBytes: number;
  /** The largest body of a list page. */
  bodyBytes: number;
}

/** The values a summary may shorten (a progress report is bounded by the engine). */
const LARGE_FIELDS = ['input', 'output', 'error', 'wait'] as const;

export type TaskListItem = Record<string, unknown> & { id: string; truncated: string[]; url: string };

const utf8Bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/** The first bytes of `json` (at most `max`, "…" included), cut between whole characters. */
export function preview(json: string, max: number): string {
  let cut = json.slice(0, Math.max(0, max - 3));
  for (let over = utf8Bytes(cut) - (max - 3); over > 0; over = utf8Bytes(cut) - (max - 3)) cut = cut.slice(0, cut.length - Math.ceil(over / 3));
  if (/[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/** A task's summary for lists and command answers, with the size of its JSON and of the values it read. */
/** The value itself, or its preview when its JSON is over `valueBytes`; counts the bytes read in `acc`. */
function shortened(value: unknown, valueBytes: number, acc: { read: number; truncated: string[] }, name: string): unknown {
  const json = value === undefined || value === null ? undefined : JSON.stringify(value);
  if (json === undefined) return value;
  const bytes = json.length * 3 <= valueBytes ? json.length : utf8Bytes(json);
  acc.read += bytes;
  if (bytes <= valueBytes) return value;
  acc.truncated.push(name);
  return preview(json, valueBytes);
}

/**
 * An approval for the list: its payload and its decisions (with their data) cut like a task's
 * values, named in `truncated`; `url` is its task, whose page has them whole.
 */
export function summarizeApproval(approval: ApprovalInfo, valueBytes: number): Record<string, unknown> {
  const acc = { read: 0, truncated: [] as string[] };
  const payload = shortened(approval.payload, valueBytes, acc, 'payload');
  const decisions = shortened(approval.decisions, valueBytes, acc, 'decisions');
  return { ...approval, payload, decisions, truncated: acc.truncated, url: `/api/tasks/${encodeURIComponent(approval.taskId)}` };
}

export function summarizeTask(task: TaskSummary, valueBytes: number): { item: TaskListItem; bytes: number; readBytes: number } {
  const item: Record<string, unknown> = { ...task };
  const acc = { read: 0, truncated: [] as string[] };
  for (const field of LARGE_FIELDS) if (field in item) item[field] = shortened(item[field], valueBytes, acc, field);
  if (task.usage) item.usage = { ...task.usage, steps: shortened(task.usage.steps, valueBytes, acc, 'usage.steps') };
  item.truncated = acc.truncated;
  item.url = `/api/tasks/${encodeURIComponent(task.id)}`;
  const bytes = utf8Bytes(JSON.stringify(item));
  return { item: item as TaskListItem, bytes, readBytes: acc.read + bytes };
}

export interface TaskPage {
  tasks: TaskListItem[];
  nextCursor: string | null;
  /** Present when the page stopped before `limit` tasks because its body reached the ceiling. */
  limitedBy?: 'bytes';
}

/** Tasks read from the engine at once, at most. */
const MAX_CHUNK = 50;

/** The next chunk's size: as many tasks as the ones read so far suggest fit in `bodyBytes`. */
function chunkSize(readBytes: number, read: number, left: number, bodyBytes: number): number {
  const perTask = read === 0 ? 0 : readBytes / read;
  const fits = perTask === 0 ? MAX_CHUNK : Math.floor(bodyBytes / perTask);
  return Math.max(1, Math.min(MAX_CHUNK, left, fits));
}

/** One page of `engine.list(filter)`, summarized, within `limits.bodyBytes`. */
export async function listPage(engine: Engine, filter: Omit<ListOptions, 'limit'>, limit: number, limits: SummaryLimits): Promise<TaskPage> {
  const tasks: TaskListItem[] = [];
  let cursor = filter.cursor;
  let body = 128; // `{"tasks":[],"nextCursor":"…","limitedBy":"bytes"}` around the items, with room to spare
  let readBytes = 0;
  let read = 0;
  for (;;) {
    const want = chunkSize(readBytes, read, limit - tasks.length, limits.bodyBytes);
    const chunk = await engine.list({ ...filter, limit: want, ...(cursor !== undefined ? { cursor } : {}) });
    for (const task of chunk.tasks) {
      const s = summarizeTask(task, limits.valueBytes);
      read++;
      readBytes += s.readBytes;
      if (tasks.length > 0 && body + s.bytes + 1 > limits.bodyBytes) return { tasks, nextCursor: (tasks[tasks.length - 1] as TaskListItem).id, limitedBy: 'bytes' };
      tasks.push(s.item);
      body += s.bytes + 1;
    }
    if (chunk.nextCursor === null || tasks.length >= limit) return { tasks, nextCursor: chunk.nextCursor };
    cursor = chunk.nextCursor;
  }
}
