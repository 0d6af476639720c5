#!/usr/bin/env node
// Writes tests/fixtures/tokenizer/added_tokens.json: GPT-2's tokenizer with tokens added
// (as a fine-tune's tokenizer.json carries them: <|endoftext|>, <|im_start|> and <mask>
// (lstrip, as RoBERTa's) special, " Bonjour tout", "ünï" and the overlapping "xab" and "bcdq"
// not, all but the first past vocab.json's ids), and texts with the
// ids Hugging Face's JavaScript `tokenizers` (@huggingface/tokenizers 0.2.0, npm) gives
// them through the tokenizer.json transformers' GPT2Converter writes (ByteLevel
// pre-tokenizer, BPE). "special": true is that tokenizer as it is, which reads special
// tokens in the text (gpt-vk's --special); false is the same without its special tokens,
// which leaves them text (gpt-vk's default, as GPT-2's own encoder); "decoded" is what the
// ids decode to.
//
// Run from anywhere (npm ci in tools/ first): node tools/make_added_tokens_fixture.js
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@huggingface/tokenizers');

const root = path.join(__dirname, '..');
const encoder = JSON.parse(fs.readFileSync(path.join(root, 'models/gpt2-tokenizer/encoder.json'), 'utf8'));
const merges = fs.readFileSync(path.join(root, 'models/gpt2-tokenizer/vocab.bpe'), 'utf8').split('\n').slice(1)
  .filter((m) => m.trim());
const added = [
  { id: 50256, content: '<|endoftext|>', special: true },
  { id: 50257, content: '<|im_start|>', special: true },
  { id: 50258, content: ' Bonjour tout', special: false },
  { id: 50259, content: '\u00fcn\u00ef', special: false },
  { id: 50260, content: '<mask>', special: true, lstrip: true },
  { id: 50261, content: 'xab', special: false },
  { id: 50262, content: 'bcdq', special: false, rstrip: true },
].map((a) => ({ single_word: false, lstrip: false, rstrip: false, normalized: !a.special, ...a }));
const texts = [
  '<|im_start|>user Bonjour tout le monde, \u00fcn\u00ef!<|endoftext|>',
  'plain text Bonjour toutes \u00fcn\u00ef\u00fcn\u00ef',
  '<|endoftext|><|im_start|> Bonjour tout<|im_start|',
  'a <mask> b \u3000<mask>xabcdq  bcdq \t\nz',
];

// The byte alphabet's spelling of the added tokens' text, as vocab.json spells its tokens.
function byteLevel(text) {
  const printable = (b) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const map = [];
  for (let b = 0, n = 0; b < 256; ++b) map[b] = String.fromCodePoint(printable(b) ? b : 256 + n++);
  return [...Buffer.from(text, 'utf8')].map((b) => map[b]).join('');
}

function tokenizerJson(withSpecial) {
  const vocab = { ...encoder };
  for (const a of added) vocab[byteLevel(a.content)] = a.id;
  const byteLevelStep = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: added.filter((a) => withSpecial || !a.special),
    normalizer: null, pre_tokenizer: byteLevelStep, post_processor: byteLevelStep, decoder: byteLevelStep,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
      fuse_unk: false, byte_fallback: false, vocab, merges },
  };
}

const cases = [];
for (const special of [false, true]) {
  const tok = new Tokenizer(tokenizerJson(special), {});
  for (const text of texts) {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    // What the ids decode to: the text, less the whitespace lstrip and rstrip took.
    cases.push({ text, special, ids, decoded: tok.decode(ids, { skip_special_tokens: false }) });
  }
}
const out = path.join(root, 'tests/fixtures/tokenizer/added_tokens.json');
fs.writeFileSync(out, JSON.stringify({ generator: 'tools/make_added_tokens_fixture.js', added_tokens: added, cases },
  null, 1) + '\n');
console.log(out);
