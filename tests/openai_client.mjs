// The official `openai` npm client (pinned in tools/package.json) against `gpt-vk serve` on
// the bundled model: completions plain, streamed, n > 1, stop, logprobs, seed, logit_bias,
// presence and frequency penalties, chat (with logprobs), and a conversation's second turn
// reporting the prompt tokens the prompt cache kept (usage.prompt_tokens_details).
// Starts the server itself on a free loopback port and stops it with SIGTERM (exit 0).
//
//   node tests/openai_client.mjs build/gpt-vk
//
// Exits 77 (CTest: skipped) when the client is not installed (tools/setup.sh installs it).
import { strict as assert } from 'node:assert';
import { startServer, stopServer } from './support/serve_process.mjs';
import { toolPackage } from './support/tool_package.mjs';

const { OpenAI } = toolPackage('openai', 'openai_client');

const binary = process.argv[2];
assert.ok(binary, 'usage: node tests/openai_client.mjs PATH/TO/gpt-vk');

async function collectStream(stream, chat = false) {
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += chat ? (c.delta?.content ?? '') : c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { text, finish };
}

async function run(client, model) {
  const prompt = 'It was a fine morning, and';

  // Plain, greedy: the whole max_tokens unless <|endoftext|> came first.
  const plain = await client.completions.create({ model, prompt, max_tokens: 20, temperature: 0, logprobs: 3 });
  const c0 = plain.choices[0];
  assert.equal(plain.object, 'text_completion');
  assert.ok(c0.text.length > 0);
  assert.equal(c0.logprobs.tokens.length, plain.usage.completion_tokens, 'one logprob per generated token');
  assert.equal(c0.logprobs.tokens.join(''), c0.text, 'the tokens spell the text');
  for (let i = 0; i < c0.logprobs.tokens.length; ++i) {
    const top = c0.logprobs.top_logprobs[i];
    assert.equal(Object.keys(top).length, 3);
    const best = Math.max(...Object.values(top));
    assert.ok(Math.abs(c0.logprobs.token_logprobs[i] - best) < 1e-6, 'greedy picks the most probable token');
    assert.ok(c0.logprobs.token_logprobs[i] <= 0);
  }
  if (c0.finish_reason === 'length') assert.equal(plain.usage.completion_tokens, 20);

  // Seeded sampling: reproducible, and the stream says the same.
  const sampled = { model, prompt, max_tokens: 24, temperature: 0.9, top_p: 0.95, seed: 42 };
  const a = await client.completions.create(sampled);
  const b = await client.completions.create(sampled);
  assert.equal(a.choices[0].text, b.choices[0].text, 'same seed, same text');
  const streamed = await collectStream(await client.completions.create({ ...sampled, stream: true }));
  assert.equal(streamed.text, a.choices[0].text, 'streamed text equals the non-streamed text');
  assert.equal(streamed.finish, a.choices[0].finish_reason);

  // n > 1: choice i is the request with seed + i.
  const many = await client.completions.create({ ...sampled, n: 3 });
  assert.equal(many.choices.length, 3);
  for (let i = 0; i < 3; ++i) {
    assert.equal(many.choices[i].index, i);
    const alone = await client.completions.create({ ...sampled, seed: 42 + i });
    assert.equal(many.choices[i].text, alone.choices[0].text, `choice ${i} equals seed ${42 + i} alone`);
  }
  assert.ok(new Set(many.choices.map((c) => c.text)).size > 1, 'three samples differ');

  // stop: the greedy text cut right before a stop string taken from its middle.
  const stop = c0.text.slice(Math.floor(c0.text.length / 2), Math.floor(c0.text.length / 2) + 5);
  const stopped = await client.completions.create({ model, prompt, max_tokens: 20, temperature: 0, stop: [stop] });
  assert.equal(stopped.choices[0].text, c0.text.slice(0, c0.text.indexOf(stop)));
  assert.equal(stopped.choices[0].finish_reason, 'stop');

  // Chat, plain and streamed, with a seed.
  const chat = { model, messages: [{ role: 'user', content: 'Who is Emma?' }], max_tokens: 20, seed: 3 };
  const reply = await client.chat.completions.create(chat);
  assert.equal(reply.choices[0].message.role, 'assistant');
  const chatStream = await collectStream(await client.chat.completions.create({ ...chat, stream: true }), true);
  assert.equal(chatStream.text, reply.choices[0].message.content);

  // Sampling controls through the client's own parameters. logit_bias -100 on the greedy
  // first token bans it: the first token changes.
  const base = client.baseURL.replace(/\/v1\/?$/, '');
  const tokenized = await (await fetch(`${base}/tokenize`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ content: c0.logprobs.tokens[0] }),
  })).json();
  assert.equal(tokenized.tokens.length, 1, 'the greedy first token is one token');
  const banned = await client.completions.create({
    model, prompt, max_tokens: 20, temperature: 0, logprobs: 0, logit_bias: { [tokenized.tokens[0]]: -100 },
  });
  assert.notEqual(banned.choices[0].logprobs.tokens[0], c0.logprobs.tokens[0], 'logit_bias -100 bans the greedy token');
  // Greedy GPT-2 repeats itself; presence and frequency penalties make it use more distinct tokens.
  const long = { model, prompt, max_tokens: 48, temperature: 0, logprobs: 0 };
  const distinct = (r) => new Set(r.choices[0].logprobs.tokens).size;
  const loops = await client.completions.create(long);
  const varied = await client.completions.create({ ...long, presence_penalty: 1.0, frequency_penalty: 1.5 });
  assert.equal(loops.usage.completion_tokens, 48);
  assert.ok(distinct(varied) > distinct(loops), `penalties: ${distinct(varied)} distinct tokens vs ${distinct(loops)}`);

  // Chat logprobs in OpenAI's chat shape.
  const withLogprobs = await client.chat.completions.create({ ...chat, logprobs: true, top_logprobs: 2, max_tokens: 6 });
  const content = withLogprobs.choices[0].logprobs.content;
  assert.equal(content.length, withLogprobs.usage.completion_tokens);
  for (const e of content) {
    assert.equal(e.top_logprobs.length, 2);
    assert.ok(e.logprob <= 0 && e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob);
  }

  // A conversation's second turn: the slot that ran the first keeps its prompt, and the
  // second transcript begins with it, so its whole --prefill-chunk chunks (16 tokens here)
  // are not run again: OpenAI's usage.prompt_tokens_details.cached_tokens counts them.
  const first = [
    { role: 'system', content: 'A conversation in the drawing room at Longbourn, one rainy afternoon in November.' },
    { role: 'user', content: 'What do you think of Mr. Bingley, who has taken Netherfield Park at last?' },
  ];
  const turn1 = await client.chat.completions.create({ model, messages: first, max_tokens: 8, temperature: 0 });
  const turn2 = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0,
    messages: [...first, turn1.choices[0].message, { role: 'user', content: 'And of his sisters?' }],
  });
  const cached = turn2.usage.prompt_tokens_details?.cached_tokens;
  assert.equal(turn1.usage.prompt_tokens_details?.cached_tokens, 0, 'nothing kept before the first turn');
  assert.ok(cached >= 32 && cached % 16 === 0 && cached < turn2.usage.prompt_tokens,
    `the second turn reuses whole chunks of the first: ${cached} of ${turn2.usage.prompt_tokens} tokens`);

  // Errors come back as the client's APIError with the status.
  await assert.rejects(client.completions.create({ model, prompt, temperature: 5 }), (e) => e.status === 400);
  await assert.rejects(client.completions.create({ model, prompt, presence_penalty: 3 }),
    (e) => e.status === 400 && e.param === 'presence_penalty');
  console.log(`openai_client: all checks passed (greedy text: ${JSON.stringify(c0.text)})`);
}

const { child, port } = startServer(binary, ['--parallel', '4', '--prefill-chunk', '16']);
let failed = false;
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${await port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  const models = await client.models.list();
  const model = await client.models.retrieve(models.data[0].id);
  assert.equal(model.id, models.data[0].id);
  await run(client, models.data[0].id);
} catch (e) {
  failed = true;
  console.error('openai_client: FAILED:', e);
}
const { code, validation } = await stopServer(child);
if (code !== 0) {
  console.error(`openai_client: the server's exit after SIGTERM was ${code}, not 0`);
  failed = true;
}
if (validation) {
  console.error(`openai_client: the server printed a validation message: ${validation}`);
  failed = true;
}
process.exit(failed ? 1 : 0);
