/**
 * @module worker/alerts-job
 * Internal: not part of the public API (the package exports only its index modules).
 * A worker's part of the engine's alerts (`alerts/monitor.ts`): a look at the store every
 * `alerts.every`, and the crash loops, dwell alerts and budgets it hears of on the engine's news.
 */
import { AlertMonitor, type AlertHost } from '../alerts/monitor.ts';
import type { ResolvedAlerts } from '../alerts/options.ts';
import { coerceError } from '../errors.ts';
import type { NewsBus } from '../news.ts';
import type { PeriodicScheduler } from './periodic.ts';

/** Starts the watch; returns the function that stops listening to the news. */
export function alertsJob(scheduler: PeriodicScheduler, host: AlertHost & { bus: NewsBus; workerId: string }, options: ResolvedAlerts): () => void {
  const monitor = new AlertMonitor(host, options);
  scheduler.add({ name: 'watching for alerts', periodMs: monitor.everyMs, firstDelayMs: Math.min(monitor.everyMs, 5000), jitterMs: 1000, run: () => monitor.scan() });
  const failed = (during: string) => (e: unknown) => host.onError(coerceError(e), during);
  const off = [
    host.bus.on('run:claimed', (n) => {
      if (n.workerId === host.workerId) monitor.claimed(n.run).catch(failed(`checking task ${n.run.taskId} for a crash loop`));
    }),
    host.bus.on('dwell:alert', (n) => void monitor.dwell(n.alert).catch(failed(`alerting on task ${n.alert.taskId}`))),
    host.bus.on('budget:spent', (n) => {
      if (n.workerId === host.workerId) monitor.budget(n.run, n.payload).catch(failed(`checking the budget of task ${n.run.taskId}`));
    }),
  ];
  return () => off.forEach((f) => f());
}

/** Deletes listed alerts older than `keepMs`, every hour (also on engines that no longer raise any). */
export function alertPurgeJob(scheduler: PeriodicScheduler, host: Pick<AlertHost, 'store' | 'clock'>, keepMs: number): void {
  scheduler.add({
    name: 'deleting alerts past alerts.keep',
    periodMs: 3_600_000,
    firstDelayMs: 60_000,
    jitterMs: 60_000,
    run: async () => {
      let deleted = 1000;
      while (deleted === 1000) deleted = await host.store.purgeAlerts(host.clock.now() - keepMs, 1000);
    },
  });
}
