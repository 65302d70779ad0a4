// LangGraph.js doing the payload bench's chat loop: a graph whose one node appends a turn (two
// ~1 KB messages, the same as Stepwise's loop) to a `messages` channel with a concatenating
// reducer, and loops back until `turns` turns are done; checkpointed by its SQLite checkpointer
// (@langchain/langgraph-checkpoint-sqlite) to a fresh file. Prints one JSON line: the bytes of its
// checkpoint tables (checkpoint and metadata blobs, pending writes) and the file's size.
// Usage: node bench/peers/langgraph.mjs <sqlite file> <turns>
import Database from 'better-sqlite3';
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { turnMessages } from './chat-messages.mjs';

const [file, turnsArg] = process.argv.slice(2);
const turns = Number(turnsArg ?? 100);

const State = Annotation.Root({
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  turn: Annotation({ reducer: (_a, b) => b, default: () => 0 }),
});
const graph = new StateGraph(State)
  .addNode('chat', (s) => ({ messages: turnMessages(s.turn), turn: s.turn + 1 }))
  .addEdge(START, 'chat')
  .addConditionalEdges('chat', (s) => (s.turn < turns ? 'chat' : END))
  .compile({ checkpointer: SqliteSaver.fromConnString(file) });

const t0 = performance.now();
const out = await graph.invoke({}, { configurable: { thread_id: 'chat' }, recursionLimit: turns + 10 });
const ms = performance.now() - t0;
if (out.messages.length !== 2 * turns) throw new Error(`expected ${2 * turns} messages, got ${out.messages.length}`);
const db = new Database(file);
db.pragma('wal_checkpoint(TRUNCATE)');
const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name);
let bytes = 0;
for (const t of tables) {
  const cols = db.prepare(`PRAGMA table_info("${t}")`).all().map((c) => `coalesce(length("${c.name}"), 0)`);
  bytes += Number(db.prepare(`SELECT coalesce(sum(${cols.join(' + ')}), 0) AS n FROM "${t}"`).get().n);
}
const pages = db.pragma('page_count', { simple: true }) * db.pragma('page_size', { simple: true });
db.close();
console.log(JSON.stringify({ turns, bytes, fileBytes: pages, ms }));
