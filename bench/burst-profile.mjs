// Loaded into the drain's worker processes (`node --import`) when STEPWISE_BENCH_PROFILE names a
// directory: each SIGUSR2 toggles a sampling CPU profile and a sampling heap profile, which the
// benchmark sends just before a burst falls due and once its last task has finished, so the
// profiles cover the bursts and nothing else. Each burst's profiles are written to that directory
// as `cpu-<pid>-<n>.cpuprofile` and `heap-<pid>-<n>.heapprofile` (Chrome DevTools opens both).
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.STEPWISE_BENCH_PROFILE;
const session = new Session();
session.connect();
session.post('Profiler.enable');
session.post('Profiler.setSamplingInterval', { interval: 250 });
session.post('HeapProfiler.enable');
let on = false;
let n = 0;
process.on('SIGUSR2', () => {
  if (!on) {
    session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    session.post('Profiler.start');
    on = true;
    return;
  }
  on = false;
  const k = n++;
  // The inspector answers a session of its own thread synchronously.
  session.post('Profiler.stop', (_, { profile }) => writeFileSync(join(dir, `cpu-${process.pid}-${k}.cpuprofile`), JSON.stringify(profile)));
  session.post('HeapProfiler.stopSampling', (_, { profile }) => writeFileSync(join(dir, `heap-${process.pid}-${k}.heapprofile`), JSON.stringify(profile)));
});
