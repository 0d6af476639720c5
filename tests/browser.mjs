// A real browser (Debian's chromium, driven by playwright-core) against `gpt-vk serve`:
// - CORS (--cors-origin): a page of the allowed origin calls the server with fetch() and
//   with the official openai client (plain, streamed, models), whose requests carry an API
//   key and the client's own headers and so go through a preflight; a page of another
//   origin is blocked by the browser.
// - The server's own page at GET /: completion and chat, typed and clicked as a person
//   would, give the text the API gives for the same request (a seed past 2^53 too), a refused
//   chat turn leaves the page, and Stop ends a long one.
// Two static page servers (two origins) and one gpt-vk, all on loopback ports chosen by
// the system; every wait is bounded.
//
//   node tests/browser.mjs build/gpt-vk
//
// Exits 77 (CTest: skipped) when chromium or playwright-core is not installed: the suite
// does not install a browser (`apt-get install chromium` and tools/setup.sh's npm packages
// bring both). tests/test_server_cors.cpp checks the same headers without a browser.
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { strict as assert } from 'node:assert';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, stopServer } from './support/serve_process.mjs';
import { toolPackage } from './support/tool_package.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const modules = path.join(here, '../tools/node_modules');
const browserPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const { chromium } = toolPackage('playwright-core', 'browser');
if (!existsSync(browserPath) || !existsSync(path.join(modules, 'openai/index.mjs'))) {
  console.error(`browser: no browser at ${browserPath} (apt-get install chromium), or no openai package`);
  process.exit(77);
}
const binary = process.argv[2];
assert.ok(binary, 'usage: node tests/browser.mjs PATH/TO/gpt-vk');

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

// The continuation the server on `apiPort` gives for the JSON text `body`, asked from node.
async function directText(apiPort, route, body) {
  const r = await fetch(`http://127.0.0.1:${apiPort}${route}`, { method: 'POST',
    headers: { Authorization: 'Bearer sesame', 'Content-Type': 'application/json' },
    body, signal: AbortSignal.timeout(60000) });
  assert.equal(r.status, 200);
  const c = (await r.json()).choices[0];
  return c.text ?? c.message.content;
}
// The greedy continuation of `body`.
const direct = (apiPort, route, body) => directText(apiPort, route, JSON.stringify({ ...body, temperature: 0 }));

// A seed past 2^53, which a JS number would round to another (the page sends the digits).
const kSeed = '12345678901234567';
const seeded = (seed) => `{"prompt":"Emma","max_tokens":24,"temperature":1.25,"top_p":0.95,"top_k":40,"seed":${seed}}`;

// The server's page at /, used as a person would: the key typed in, a completion and a
// chat turn generated at temperature 0, a chat turn refused, a seeded completion after the
// switch back, and a long completion stopped.
async function usePage(browser, apiPort) {
  const tab = await browser.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  await tab.goto(`http://127.0.0.1:${apiPort}/`, { timeout: 30000 });
  const settled = () => tab.waitForFunction(() => ['done', 'error'].includes(document.body.dataset.state), null,
                                            { timeout: 60000 });
  await settled();  // the model's name needs the key: 401 until it is typed
  assert.match(await tab.textContent('#status'), /API key/);
  await tab.fill('#key', 'sesame');
  await tab.dispatchEvent('#key', 'change');
  await tab.waitForFunction(() => document.getElementById('model').textContent !== '', null, { timeout: 30000 });
  await tab.fill('#temperature', '0');

  await tab.fill('#prompt', 'Emma');
  await tab.fill('#max_tokens', '6');
  await tab.click('#run');  // its handler has set the state to running when the click returns
  await settled();
  const completion = { output: await tab.textContent('#output'), status: await tab.textContent('#status') };

  await tab.check('input[value=chat]');
  await tab.click('#clear');
  await tab.fill('#prompt', 'Hi');
  await tab.fill('#max_tokens', '4');
  await tab.press('#prompt', 'Control+Enter');
  await settled();
  const chat = { output: await tab.textContent('#output'), status: await tab.textContent('#status') };

  // A turn the server refuses (max_tokens past the context) leaves the page and the
  // conversation, its text back in the box.
  await tab.fill('#prompt', 'Again');
  await tab.fill('#max_tokens', '100000');
  await tab.press('#prompt', 'Control+Enter');
  await settled();
  const refused = { output: await tab.textContent('#output'), prompt: await tab.inputValue('#prompt'),
                    state: await tab.evaluate(() => document.body.dataset.state) };

  // Another mode starts afresh; a temperature off the spinner's steps and a seed past 2^53.
  await tab.check('input[value=completion]');
  const switched = await tab.textContent('#output');
  await tab.fill('#prompt', 'Emma');
  await tab.fill('#max_tokens', '24');
  await tab.fill('#temperature', '1.25');
  await tab.fill('#seed', kSeed);
  await tab.click('#run');
  await settled();
  const sampled = { output: await tab.textContent('#output'), status: await tab.textContent('#status') };
  await tab.fill('#seed', '');

  await tab.fill('#prompt', 'It was');
  await tab.fill('#max_tokens', '200');
  await tab.click('#run');
  await tab.waitForFunction(() => document.querySelectorAll('#output span')[1]?.textContent.length > 0, null,
                            { timeout: 30000 });
  await tab.click('#cancel');
  await settled();
  const stopped = await tab.textContent('#status');
  await tab.close();
  return { completion, chat, refused, switched, sampled, stopped, errors };
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
const { child, port: portPromise } = startServer(binary, ['--parallel', '2', '--api-key', 'sesame', '--cors-origin', allowed]);
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
  const text = await direct(apiPort, '/v1/completions', { prompt: 'Emma', max_tokens: 6 });
  assert.ok(text.length > 0);
  assert.equal(ok.plain, text);
  assert.equal(ok.stream, text);
  assert.ok(ok.model.length > 0);

  const blocked = await visit(browser, other, apiPort);
  console.log('other origin:', JSON.stringify(blocked));
  assert.match(blocked.fetch.error, /TypeError/);
  assert.equal(blocked.openai_error, 'APIConnectionError');

  const used = await usePage(browser, apiPort);
  console.log('the server\'s page:', JSON.stringify(used));
  assert.deepEqual(used.errors, []);
  assert.equal(used.completion.output, `Emma${text}`);
  assert.match(used.completion.status, /^6 tokens in .* finish: length$/);
  const reply = await direct(apiPort, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 });
  assert.equal(used.chat.output, `User: Hi\nAssistant: ${reply}\n`);
  assert.match(used.chat.status, /^4 tokens in /);
  assert.deepEqual(used.refused, { output: `User: Hi\nAssistant: ${reply}\n`, prompt: 'Again', state: 'error' });
  assert.equal(used.switched, '');
  const sampledText = await directText(apiPort, '/v1/completions', seeded(kSeed));
  // The seed a JS number would have sent answers otherwise, so the check can tell them apart.
  assert.notEqual(await directText(apiPort, '/v1/completions', seeded(String(Number(kSeed)))), sampledText);
  assert.equal(used.sampled.output, `Emma${sampledText}`);
  assert.match(used.sampled.status, /^24 tokens in /);
  assert.equal(used.stopped, 'stopped');
  console.log('browser: 3 pages, all checks passed');
} catch (e) {
  console.error('browser failed:', e);
  failed = true;
} finally {
  if (browser) await browser.close();
  allowedPages.close();
  otherPages.close();
}
const { code, validation } = await stopServer(child);
if (code !== 0) {
  console.error(`browser: the server's exit after SIGTERM was ${code}, not 0`);
  failed = true;
}
if (validation) {
  console.error(`browser: the server printed a validation message: ${validation}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
