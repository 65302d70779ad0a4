// The server process of the stream bench's memory figure: an engine on the store named in argv[2]
// with a worker for bench/workflows.ts and the HTTP API on a free port (token argv[3]). It tells
// its parent the URL over IPC and answers `'mem'` with its heap and RSS after a full garbage
// collection, its open connections and its unfinished responses. Run with --expose-gc.
import { Engine } from '../dist/index.js';
import * as workflows from './workflows.ts';
import { serveApi } from './serve-api.ts';

const engine = new Engine({ store: process.argv[2] as string, workflows: Object.values(workflows) });
await engine.ready();
const worker = engine.worker({ concurrency: 8 });
await worker.start();
const { base, http } = await serveApi(engine, process.argv[3] as string);
/** Open TCP connections, and requests whose response has not ended (the SSE streams). */
let open = 0;
let streams = 0;
http.on('connection', (socket) => {
  open++;
  socket.on('close', () => open--);
});
http.on('request', (_req, res) => {
  streams++;
  res.on('close', () => streams--);
});
process.send?.({ url: base });
process.on('message', (m) => {
  if (m === 'mem') {
    const gc = (globalThis as { gc?: () => void }).gc;
    if (!gc) throw new Error('bench/stream-server.ts needs --expose-gc');
    gc();
    gc();
    const u = process.memoryUsage();
    process.send?.({ heapUsed: u.heapUsed, rss: u.rss, connections: open, streams });
  } else if (m === 'stop') {
    void worker
      .stop()
      .then(() => engine.close())
      .then(() => process.exit(0));
  }
});
