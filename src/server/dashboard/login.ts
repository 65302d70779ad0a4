/**
 * @module server/dashboard/login
 * Signing in to the dashboard and out. A sign-in must come from the dashboard's own form: a
 * browser's `Sec-Fetch-Site` must say same-origin (or, from a browser that does not send it, the
 * `Origin` must be this server's host), and the form carries a one-time token that matches an
 * HTTP-only SameSite=Strict cookie set with the form (a form posted from another site has neither).
 * So a page elsewhere cannot sign a visitor's browser in as the page's author (login CSRF).
 * A valid token creates a server-side session (`sessions.ts`) whose id, not the token, goes in
 * the session cookie; signing out revokes it.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import type { TokenTable } from '../auth.ts';
import { SESSION_COOKIE, type Env } from '../middleware.ts';
import type { SessionTable } from '../sessions.ts';
import { layout } from './html.ts';
import { loginPage } from './pages.ts';

/** The cookie holding the sign-in form's token, sent back only to `/login`. */
export const LOGIN_COOKIE = 'stepwise_login';

export interface LoginDeps {
  table: TokenTable;
  sessions: SessionTable;
  headers: Record<string, string>;
}

/** Why a sign-in is refused as sent from another site, or null. */
export function crossSiteRefusal(c: Context<Env>): string | null {
  const fetchSite = c.req.header('sec-fetch-site');
  // Set by the browser, never by a page: the best witness where a browser sends it.
  if (fetchSite !== undefined) return fetchSite === 'same-origin' || fetchSite === 'none' ? null : `it came from another site (Sec-Fetch-Site: ${fetchSite.slice(0, 40)})`;
  const origin = c.req.header('origin');
  if (origin === undefined) return null;
  let host: string | null = null;
  try {
    host = origin === 'null' ? null : new URL(origin).host;
  } catch {
    host = null;
  }
  return host !== null && host === new URL(c.req.url).host ? null : `it came from another origin (${origin.slice(0, 100)})`;
}

const same = (a: string, b: string): boolean => timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());

export function loginRoutes(app: Hono<Env>, deps: LoginDeps): void {
  const secure = (c: Context<Env>): boolean => new URL(c.req.url).protocol === 'https:';
  /** The sign-in page with a fresh form token (and its cookie). */
  const form = (c: Context<Env>, message: string | null, status: number): Response => {
    const csrf = randomBytes(24).toString('base64url');
    setCookie(c, LOGIN_COOKIE, csrf, { httpOnly: true, sameSite: 'Strict', path: '/login', secure: secure(c), maxAge: 3600 });
    return c.body(layout('Sign in', null, loginPage(message, csrf)), status as 200, deps.headers);
  };

  app.get('/login', (c) => form(c, null, 200));
  app.post('/login', bodyLimit({ maxSize: 16 * 1024, onError: (c) => c.body('Too large', 413) }), async (c) => {
    const crossSite = crossSiteRefusal(c);
    if (crossSite) return form(c, `Sign-in refused: ${crossSite}. Sign in from this page.`, 403);
    const fields = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const expected = getCookie(c, LOGIN_COOKIE);
    if (!expected || typeof fields.csrf !== 'string' || !same(fields.csrf, expected)) {
      return form(c, 'Sign-in refused: the form expired or was not sent from this page. Sign in again.', 403);
    }
    const token = typeof fields.token === 'string' ? fields.token.trim() : '';
    const identity = token && token.length <= 4096 ? deps.table.identify(token) : null;
    if (!identity) return form(c, 'That token is not valid.', 401);
    deleteCookie(c, LOGIN_COOKIE, { path: '/login' });
    const session = deps.sessions.create(identity);
    setCookie(c, SESSION_COOKIE, session, { httpOnly: true, sameSite: 'Strict', path: '/', secure: secure(c), maxAge: Math.floor(deps.sessions.ttlMs / 1000) });
    return c.redirect('/');
  });
  app.post('/logout', (c) => {
    const session = getCookie(c, SESSION_COOKIE);
    if (session) deps.sessions.revoke(session);
    deleteCookie(c, SESSION_COOKIE, { path: '/' });
    return c.redirect('/login');
  });
}
