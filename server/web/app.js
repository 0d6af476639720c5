// The page's logic: streams /v1/completions or /v1/chat/completions from the server that
// served it and shows the text as it comes. Model output goes into the page as text nodes
// only, never as HTML. document.body.dataset.state says idle, running, done or error (the
// browser test waits on it).
const $ = (id) => document.getElementById(id);
const output = $('output'), status = $('status');
let chat = [];          // the chat's messages so far
let running = null;     // the AbortController of the request in flight

$('key').value = sessionStorage.getItem('gptvk-key') ?? '';
$('key').addEventListener('change', () => { sessionStorage.setItem('gptvk-key', $('key').value); loadModel(); });

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if ($('key').value) h.Authorization = `Bearer ${$('key').value}`;
  return h;
}

function setState(state, message = '') {
  document.body.dataset.state = state;
  status.textContent = message;
  status.className = state === 'error' ? 'error' : '';
  $('run').disabled = state === 'running';
  $('cancel').disabled = state !== 'running';
}

// A span of `text` (with `cls`) appended to the output, to be filled as tokens come.
function append(text, cls) {
  const span = document.createElement('span');
  if (cls) span.className = cls;
  span.textContent = text;
  output.append(span);
  return span;
}

async function loadModel() {
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    const body = await r.json();
    $('model').textContent = r.ok ? body.data[0].id : '';
    if (r.status === 503) setTimeout(loadModel, 1000);  // still loading: ask again
    if (!r.ok) setState('error', body.error?.message ?? `HTTP ${r.status}`);
    else if (document.body.dataset.state === 'error') setState('idle');
  } catch (e) {
    setState('error', `cannot reach the server: ${e}`);
  }
}

function numberField(id) {
  const v = $(id).value;
  return v === '' ? undefined : Number(v);
}

// The request's JSON text. The seed goes in as the digits typed: the server takes any 64-bit
// seed, and a JS number would round one past 2^53 to another seed's.
function requestBody(mode, prompt) {
  const body = {
    model: $('model').textContent || 'default', stream: true, stream_options: { include_usage: true },
    max_tokens: numberField('max_tokens'), temperature: numberField('temperature'),
    top_p: numberField('top_p'), top_k: numberField('top_k'),
  };
  if ($('stop').value) body.stop = $('stop').value.replaceAll('\\n', '\n');
  if (mode === 'chat') body.messages = chat;
  else body.prompt = prompt;
  const seed = $('seed').value.trim();
  if (seed === '') return JSON.stringify(body);
  if (!/^-?(0|[1-9][0-9]*)$/.test(seed)) throw new Error('the seed must be a whole number (no leading zeros)');
  return `${JSON.stringify(body).slice(0, -1)},"seed":${seed}}`;
}

// Reads the server-sent events of `response`, handing each JSON event to `onEvent`.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let pending = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    pending += decoder.decode(value, { stream: true });
    let end;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') return;
      onEvent(JSON.parse(data));
    }
  }
}

async function generate() {
  if (running) return;
  const mode = document.querySelector('input[name=mode]:checked').value;
  const prompt = $('prompt').value;
  let target, turn = [];  // a chat turn's spans, taken back if it fails
  if (mode === 'chat') {
    if (!prompt) return;
    chat.push({ role: 'user', content: prompt });
    turn = [append('User: ', 'role'), append(`${prompt}\n`), append('Assistant: ', 'role')];
    target = append('');
    turn.push(target);
    $('prompt').value = '';
  } else {
    output.textContent = '';
    append(prompt, 'prompt');
    target = append('');
  }
  running = new AbortController();
  setState('running', 'generating...');
  const started = performance.now();
  let usage = null, finish = null, failure = null;
  try {
    const path = mode === 'chat' ? '/v1/chat/completions' : '/v1/completions';
    const r = await fetch(path, { method: 'POST', headers: headers(), signal: running.signal,
                                  body: requestBody(mode, prompt) });
    if (!r.ok) throw new Error((await r.json()).error?.message ?? `HTTP ${r.status}`);
    await readEvents(r, (e) => {
      if (e.error) failure = e.error.message;
      if (e.usage) usage = e.usage;
      const c = e.choices?.[0];
      if (!c) return;
      target.textContent += mode === 'chat' ? (c.delta?.content ?? '') : c.text;
      if (c.finish_reason) finish = c.finish_reason;
    });
    if (failure) throw new Error(failure);
    if (mode === 'chat') {
      chat.push({ role: 'assistant', content: target.textContent });
      append('\n');
    }
    const s = (performance.now() - started) / 1000;
    const n = usage?.completion_tokens ?? 0;
    // The prompt cache: a chat's earlier turns are not run again (whole chunks of them).
    const cached = usage?.prompt_tokens_details?.cached_tokens ?? 0;
    const kept = cached ? `, ${cached} of ${usage.prompt_tokens} prompt tokens cached` : '';
    setState('done', `${n} tokens in ${s.toFixed(2)} s (${(n / s).toFixed(1)} tok/s)${kept}, finish: ${finish}`);
  } catch (e) {
    // Cleared while it ran (Clear, another mode): nothing is left to keep or take back, and
    // clearOutput has set the page idle.
    if (!target.isConnected) return;
    const stopped = e.name === 'AbortError';
    if (mode === 'chat' && stopped && target.textContent) {
      // Stopped mid-reply: the reply so far stays, on the page and in the conversation.
      chat.push({ role: 'assistant', content: target.textContent });
      append('\n');
    } else if (mode === 'chat') {
      // No reply: the turn leaves the page and the conversation, its text back in the box.
      chat.pop();
      turn.forEach((span) => span.remove());
      if (!$('prompt').value) $('prompt').value = prompt;
    }
    if (stopped) setState('done', 'stopped');
    else setState('error', String(e.message ?? e));
  } finally {
    running = null;
  }
}

$('form').addEventListener('submit', (e) => { e.preventDefault(); generate(); });
$('cancel').addEventListener('click', () => running?.abort());
function clearOutput() {
  running?.abort();  // its reply would go to a cleared page
  chat = [];
  output.textContent = '';
  setState('idle');
}
$('clear').addEventListener('click', clearOutput);
// A chat the page no longer shows must not go out with the next turn: a mode starts afresh.
for (const radio of document.querySelectorAll('input[name=mode]')) radio.addEventListener('change', clearOutput);
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) $('form').requestSubmit();
});
setState('idle');
loadModel();
