// A real browser (Debian's chromium, driven by playwright-core) against `gpt-vk serve
// --cors-origin`: a page of the allowed origin calls the server with fetch() and with the
// official openai client (plain, streamed, models), whose requests carry an API key and
// the client's own headers and so go through a preflight; a page of another origin is
// blocked by the browser. Two static page servers (two origins) and one gpt-vk, all on
// loopback ports chosen by the system; every wait is bounded.
//
//   node tests/browser_cors.mjs build/gpt-vk
//
// Exits 77 (CTest: skipped) when chromium or playwright-core is not installed: the suite
// does not install a browser (`apt-get install chromium` and tools/setup.sh's npm packages
// bring both). tests/test_server_cors.cpp checks the same headers without a browser.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { strict as assert } from 'node:assert';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, '../tools/node_modules');
const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
let chromium;
try {
  chromium = createRequire(path.join(here, '../tools/package.json'))('playwright-core').chromium;
} catch {
  console.error('browser_cors: playwright-core is not installed (tools/setup.sh installs it)');
  process.exit(77);
}
if (!existsSync(browserPath) || !existsSync(path.join(modules, 'openai/index.mjs'))) {
  console.error(`browser_cors: no browser at ${browserPath} (apt-get install chromium), or no openai package`);
  process.exit(77);
}
const binary = process.argv[2];
assert.ok(binary, 'usage: node tests/browser_cors.mjs PATH/TO/gpt-vk');

// The page: its results in #out as JSON, and the title 'done' when they are in.
const page = `<!doctype html><title>running</title><pre id="out"></pre><script type="module">
const api = new URLSearchParams(location.search).get('api');
const out = {};
try {
  const r = await fetch(api + '/v1/chat/completions', { method: 'POST',
    headers: { Authorization: 'Bearer sesame', 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 }) });
  out.fetch = { status: r.status, body: await r.json() };
} catch (e) { out.fetch = { error: String(e) }; }
try {
  const { default: OpenAI } = await import('/node_modules/openai/index.mjs');
  const client = new OpenAI({ baseURL: api + '/v1', apiKey: 'sesame', dangerouslyAllowBrowser: true, maxRetries: 0 });
  const req = { model: 'any', prompt: 'Emma', max_tokens: 6, temperature: 0 };
  out.plain = (await client.completions.create(req)).choices[0].text;
  out.stream = '';
  for await (const c of await client.completions.create({ ...req, stream: true })) out.stream += c.choices[0].text;
  out.model = (await client.models.list()).data[0].id;
} catch (e) { out.openai_error = e.constructor.name; }
document.getElementById('out').textContent = JSON.stringify(out);
document.title = 'done';
</script>`;

// Serves the page at / and the openai package's files under /node_modules/openai/.
function pageServer() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/') {
      res.writeHead(200, { 'Content-Type': 'text/html' }).end(page);
      return;
    }
    const file = path.normalize(path.join(modules, decodeURIComponent(url.pathname.slice('/node_modules/'.length))));
    if (!url.pathname.startsWith('/node_modules/openai/') || !file.startsWith(path.join(modules, 'openai')) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/javascript' }).end(readFileSync(file));
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// gpt-vk serve, resolved with its port once it prints the listening line.
function startGptVk(args) {
  const child = spawn(binary, ['serve', '--port', '0', '--parallel', '2', '--api-key', 'sesame', ...args],
                      { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  const port = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 120000);
    child.stderr.on('data', (d) => {
      err += d;
      const m = err.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    child.on('exit', (code) => reject(new Error(`server exited (${code}): ${err}`)));
  });
  return { child, port };
}

// What the page of `origin` found calling the server on `apiPort`.
async function visit(browser, origin, apiPort) {
  const tab = await browser.newPage();
  await tab.goto(`${origin}/?api=http://127.0.0.1:${apiPort}`, { timeout: 30000 });
  await tab.waitForFunction(() => document.title === 'done', null, { timeout: 60000 });
  const found = JSON.parse(await tab.textContent('#out'));
  await tab.close();
  return found;
}

const allowedPages = await pageServer(), otherPages = await pageServer();
const allowed = `http://127.0.0.1:${allowedPages.address().port}`;
const other = `http://127.0.0.1:${otherPages.address().port}`;
const { child, port: portPromise } = startGptVk(['--cors-origin', allowed]);
let browser;
let failed = false;
try {
  const apiPort = await portPromise;
  browser = await chromium.launch({ executablePath: browserPath, timeout: 60000, args: ['--no-sandbox', '--disable-gpu',
    '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });

  const ok = await visit(browser, allowed, apiPort);
  console.log('allowed origin:', JSON.stringify(ok));
  assert.equal(ok.fetch.status, 200);
  assert.equal(typeof ok.fetch.body.choices[0].message.content, 'string');
  assert.equal(ok.openai_error, undefined);
  // The same request from node (no browser, no CORS) gives the same greedy text.
  const direct = await fetch(`http://127.0.0.1:${apiPort}/v1/completions`, { method: 'POST',
    headers: { Authorization: 'Bearer sesame', 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Emma', max_tokens: 6, temperature: 0 }), signal: AbortSignal.timeout(60000) });
  const text = (await direct.json()).choices[0].text;
  assert.ok(text.length > 0);
  assert.equal(ok.plain, text);
  assert.equal(ok.stream, text);
  assert.ok(ok.model.length > 0);

  const blocked = await visit(browser, other, apiPort);
  console.log('other origin:', JSON.stringify(blocked));
  assert.match(blocked.fetch.error, /TypeError/);
  assert.equal(blocked.openai_error, 'APIConnectionError');
  console.log('browser_cors: 2 pages, all checks passed');
} catch (e) {
  console.error('browser_cors failed:', e);
  failed = true;
} finally {
  if (browser) await browser.close();
  child.kill('SIGTERM');
  allowedPages.close();
  otherPages.close();
}
process.exit(failed ? 1 : 0);
