// The dashboard's sign-in: a server-side session whose id (not the token) is the cookie, revoked
// by signing out, and sign-ins refused unless they come from the dashboard's own form.
import { describe, expect, it } from 'vitest';
import { workflow } from '../src/index.ts';
import { createServer, type StepwiseServer } from '../src/server/index.ts';
import { ManualClock } from '../src/testing/index.ts';
import { makeEngine } from './support/engine.ts';
import { TOKENS, tokenOf } from './support/server.ts';

const echo = workflow('echo', async (ctx, input: unknown) => ctx.step('say', () => ({ said: input })));
const ORIGIN = 'http://localhost';

function setup(clock?: ManualClock): StepwiseServer {
  const engine = makeEngine({ workflows: [echo] });
  return createServer(engine, { tokens: TOKENS, ...(clock ? { clock } : {}) });
}

/** The value of cookie `name` among a response's Set-Cookie headers ('' when it is deleted). */
function cookieOf(res: Response, name: string): string | undefined {
  for (const line of res.headers.getSetCookie()) {
    const [pair] = line.split(';');
    const at = (pair as string).indexOf('=');
    if ((pair as string).slice(0, at) === name) return (pair as string).slice(at + 1);
  }
  return undefined;
}

async function request(server: StepwiseServer, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Response> {
  return server.app.request(`${ORIGIN}${path}`, { method, headers, ...(body !== undefined ? { body } : {}), redirect: 'manual' });
}

/** The sign-in form as a browser gets it: its token field and the cookie that goes with it. */
async function openForm(server: StepwiseServer): Promise<{ csrf: string; cookie: string }> {
  const res = await request(server, 'GET', '/login');
  const html = await res.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1] as string;
  expect(csrf).toBeTruthy();
  return { csrf, cookie: `stepwise_login=${cookieOf(res, 'stepwise_login')}` };
}

const form = (fields: Record<string, string>): string => new URLSearchParams(fields).toString();
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

async function signIn(server: StepwiseServer, name: string): Promise<string> {
  const { csrf, cookie } = await openForm(server);
  const res = await request(server, 'POST', '/login', { ...FORM, cookie, origin: ORIGIN, 'sec-fetch-site': 'same-origin' }, form({ csrf, token: tokenOf(name) }));
  expect(res.status).toBe(302);
  const session = cookieOf(res, 'stepwise_session');
  expect(session).toBeTruthy();
  return session as string;
}

describe('dashboard sessions', () => {
  it('keeps a random session id in the cookie, never the token, and a second sign-in gets another id', async () => {
    const server = setup();
    const a = await signIn(server, 'oscar');
    const b = await signIn(server, 'oscar');
    expect(a).not.toBe(b);
    for (const id of [a, b]) {
      expect(id).not.toContain(tokenOf('oscar'));
      expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
    const page = await request(server, 'GET', '/api/tasks', { cookie: `stepwise_session=${a}` });
    expect(page.status).toBe(200);
    // The token itself is no session.
    expect((await request(server, 'GET', '/api/tasks', { cookie: `stepwise_session=${tokenOf('oscar')}` })).status).toBe(401);
  });

  it('refuses the old cookie after /logout, on the API and on the pages', async () => {
    const server = setup();
    const session = await signIn(server, 'vera');
    const cookie = `stepwise_session=${session}`;
    expect((await request(server, 'GET', '/', { cookie })).status).toBe(200);
    const out = await request(server, 'POST', '/logout', { cookie, origin: ORIGIN });
    expect(out.status).toBe(302);
    const api = await request(server, 'GET', '/api/tasks', { cookie });
    expect(api.status).toBe(401);
    expect(((await api.json()) as { error: { message: string } }).error.message).toContain('session has ended');
    const page = await request(server, 'GET', '/', { cookie });
    expect(page.status).toBe(302);
    expect(page.headers.get('location')).toBe('/login');
  });

  it('ends a session after 12 hours by the server clock', async () => {
    const clock = new ManualClock();
    const server = setup(clock);
    const cookie = `stepwise_session=${await signIn(server, 'vera')}`;
    await clock.advance(12 * 3_600_000 - 1);
    expect((await request(server, 'GET', '/api/tasks', { cookie })).status).toBe(200);
    await clock.advance(1);
    expect((await request(server, 'GET', '/api/tasks', { cookie })).status).toBe(401);
  });

  it('refuses a cross-site form POST to /login (login CSRF): no session is created', async () => {
    const server = setup();
    const attacker = form({ token: tokenOf('ada') });
    const cases: Array<Record<string, string>> = [
      // A current browser: another site's form.
      { ...FORM, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      { ...FORM, 'sec-fetch-site': 'same-site' },
      // A browser without Sec-Fetch-Site: the Origin names another site, or is opaque.
      { ...FORM, origin: 'https://evil.example' },
      { ...FORM, origin: 'null' },
      // No Origin and no form token (and its cookie): not the dashboard's own form.
      { ...FORM },
    ];
    for (const headers of cases) {
      const res = await request(server, 'POST', '/login', headers, attacker);
      expect(res.status).toBe(403);
      expect(cookieOf(res, 'stepwise_session')).toBeUndefined();
      expect(await res.text()).toContain('Sign-in refused');
    }
    // The form token of another browser (without its cookie) does not pass either.
    const { csrf } = await openForm(server);
    const stolen = await request(server, 'POST', '/login', { ...FORM, origin: ORIGIN }, form({ csrf, token: tokenOf('ada') }));
    expect(stolen.status).toBe(403);
    expect(cookieOf(stolen, 'stepwise_session')).toBeUndefined();
  });
});
