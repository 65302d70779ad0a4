/**
 * A stand-in for a CMS's publishing API, served over real HTTP on localhost: `POST /articles` with
 * an `Idempotency-Key` header creates an article once; the same key again returns the same article
 * (`200`, `replayed: true`) instead of publishing twice. `failAfterCommit` makes the next request
 * store the article and then answer 503, as a gateway timing out after the CMS did the work.
 */
import { createServer, type Server } from 'node:http';

export interface Article {
  id: string;
  title: string;
  body: string;
  key: string;
}

export interface FakeCms {
  url: string;
  articles: Article[];
  requests: number;
  failAfterCommit: number;
  close(): Promise<void>;
}

export async function startCms(): Promise<FakeCms> {
  const byKey = new Map<string, Article>();
  const cms: FakeCms = { url: '', articles: [], requests: 0, failAfterCommit: 0, close: () => Promise.resolve() };
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      cms.requests++;
      const key = req.headers['idempotency-key'];
      if (req.method !== 'POST' || req.url !== '/articles' || typeof key !== 'string' || !key) {
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'POST /articles with an Idempotency-Key header' }));
        return;
      }
      const seen = byKey.get(key);
      if (seen) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...seen, replayed: true }));
        return;
      }
      const { title, body } = JSON.parse(raw) as { title: string; body: string };
      const article: Article = { id: `art-${cms.articles.length + 1}`, title, body, key };
      byKey.set(key, article);
      cms.articles.push(article);
      if (cms.failAfterCommit > 0) {
        cms.failAfterCommit--;
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'gateway timeout' }));
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ ...article, replayed: false }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  cms.url = `http://127.0.0.1:${address.port}`;
  cms.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return cms;
}
