// Sums the profiles bench/burst-profile.mjs wrote (STEPWISE_BENCH_PROFILE=<dir>): the functions
// that took the most CPU (self time, idle excluded) and that allocated the most bytes, over every
// burst of every worker process in the directory.
// Usage: node bench/profile-summary.mjs <dir> [rows]
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const [dir, rowsArg] = process.argv.slice(2);
if (!dir) throw new Error('usage: node bench/profile-summary.mjs <dir> [rows]');
const rows = Number(rowsArg ?? 30);
const name = (f) => `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\/(node_modules|dist|src)\//, '$1/')}:${f.lineNumber + 1}`;

const cpu = new Map();
let busyUs = 0;
const heap = new Map();
let bytes = 0;
for (const file of readdirSync(dir)) {
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8'));
  if (file.endsWith('.cpuprofile')) {
    const byId = new Map(p.nodes.map((n) => [n.id, n]));
    p.samples.forEach((id, i) => {
      const f = byId.get(id).callFrame;
      // Idle time, and the inspector's own work of starting the profile (`dispatch`), are not the worker's.
      if (f.functionName === '(idle)' || f.functionName === '(program)' || (f.functionName === 'dispatch' && !f.url)) return;
      const us = p.timeDeltas[i] ?? 0;
      busyUs += us;
      cpu.set(name(f), (cpu.get(name(f)) ?? 0) + us);
    });
  } else if (file.endsWith('.heapprofile')) {
    const visit = (n) => {
      bytes += n.selfSize;
      heap.set(name(n.callFrame), (heap.get(name(n.callFrame)) ?? 0) + n.selfSize);
      n.children.forEach(visit);
    };
    visit(p.head);
  }
}
const top = (m, total, unit) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, rows)
    .map(([k, v]) => `${unit(v).padStart(9)} ${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`)
    .join('\n');
console.log(`CPU, self time (${(busyUs / 1000).toFixed(0)} ms busy in all):`);
console.log(top(cpu, busyUs, (us) => `${(us / 1000).toFixed(1)} ms`));
console.log(`\nAllocated (${(bytes / 1e6).toFixed(1)} MB in all, sampled):`);
console.log(top(heap, bytes, (b) => `${(b / 1e6).toFixed(2)} MB`));
