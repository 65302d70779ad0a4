// Schedules over HTTP: create, list, get, update, pause, resume, trigger and delete, with the
// roles' rights and the engine's codes (bad cron 400, unknown 404, another definition 409).
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { createServer } from '../src/server/index.ts';
import { makeEngine } from './support/engine.ts';
import { call, TOKENS } from './support/server.ts';

const report = workflow('report', async (ctx) => ctx.scheduledAt?.toISOString() ?? null);

function setup() {
  const clock = new ManualClock(Date.UTC(2030, 0, 1));
  const engine = makeEngine({ workflows: [report], clock });
  return { engine, clock, server: createServer(engine, { tokens: TOKENS }) };
}

describe('HTTP API: schedules', () => {
  it('creates (201, then 200 for the same definition, 409 for another), lists with next runs, gets, updates and deletes', async () => {
    const { server } = setup();
    const body = { id: 'daily-report', workflow: 'report', cron: '0 6 * * *', timezone: 'Europe/Berlin', input: { kind: 'daily' } };
    const created = await call(server, 'POST', '/api/schedules', { as: 'oscar', body });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ id: 'daily-report', nextRunAt: Date.UTC(2030, 0, 1, 5), source: 'api', paused: false });
    expect((await call(server, 'POST', '/api/schedules', { as: 'oscar', body })).status).toBe(200);
    const other = await call(server, 'POST', '/api/schedules', { as: 'oscar', body: { ...body, cron: '0 7 * * *' } });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('CONFLICT');
    const list = await call(server, 'GET', '/api/schedules', { as: 'vera' });
    expect(list.status).toBe(200);
    expect(list.body.schedules.map((s: { id: string; nextRunAt: number }) => [s.id, s.nextRunAt])).toEqual([['daily-report', Date.UTC(2030, 0, 1, 5)]]);
    const updated = await call(server, 'PUT', '/api/schedules/daily-report', { as: 'oscar', body: { workflow: 'report', cron: '0 7 * * *', timezone: 'Europe/Berlin' } });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ cron: '0 7 * * *', nextRunAt: Date.UTC(2030, 0, 1, 6), input: null });
    expect((await call(server, 'GET', '/api/schedules/daily-report', { as: 'vera' })).body.cron).toBe('0 7 * * *');
    expect((await call(server, 'DELETE', '/api/schedules/daily-report', { as: 'oscar' })).status).toBe(403); // deleting needs the delete right
    expect((await call(server, 'DELETE', '/api/schedules/daily-report', { as: 'ada' })).body).toEqual({ deleted: true });
    expect((await call(server, 'DELETE', '/api/schedules/daily-report', { as: 'ada' })).status).toBe(404);
    expect((await call(server, 'GET', '/api/schedules/daily-report', { as: 'vera' })).status).toBe(404);
  });

  it('pauses, resumes and triggers; a viewer may read but not change', async () => {
    const { server, engine, clock } = setup();
    await call(server, 'POST', '/api/schedules', { as: 'oscar', body: { id: 'hourly', workflow: 'report', cron: '0 * * * *' } });
    expect((await call(server, 'POST', '/api/schedules/hourly/pause', { as: 'vera', body: {} })).status).toBe(403);
    expect((await call(server, 'POST', '/api/schedules/hourly/pause', { as: 'oscar', body: {} })).body).toMatchObject({ paused: true, nextRunAt: null });
    await clock.advance('90m');
    expect((await call(server, 'POST', '/api/schedules/hourly/resume', { as: 'oscar', body: {} })).body).toMatchObject({ paused: false, nextRunAt: Date.UTC(2030, 0, 1, 2) });
    const triggered = await call(server, 'POST', '/api/schedules/hourly/trigger', { as: 'oscar', body: {} });
    expect(triggered.status).toBe(200);
    expect((await engine.get(triggered.body.taskId)).workflow).toBe('report');
    expect((await call(server, 'POST', '/api/schedules/nope/trigger', { as: 'oscar', body: {} })).status).toBe(404);
  });

  it('refuses a bad cron, time zone, option or id with 400 naming it', async () => {
    const { server } = setup();
    const bad = async (body: object): Promise<string> => {
      const res = await call(server, 'POST', '/api/schedules', { as: 'oscar', body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_ARGUMENT');
      return res.body.error.message as string;
    };
    expect(await bad({ id: 'x', workflow: 'report', cron: '0 25 * * *' })).toMatch(/cron "0 25 \* \* \*" is not valid/);
    expect(await bad({ id: 'x', workflow: 'report', cron: '0 1 * * *', timezone: 'Nowhere/City' })).toMatch(/timezone "Nowhere\/City"/);
    expect(await bad({ id: 'x', workflow: 'report', cron: '0 1 * * *', overlapp: 'skip' })).toMatch(/overlapp/);
    expect(await bad({ id: 'not ok', workflow: 'report', cron: '0 1 * * *' })).toMatch(/schedule id/);
  });
});
