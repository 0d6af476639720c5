#!/usr/bin/env node
// Writes the fixtures of GPT-1's tokenizer (Hugging Face's "openai-gpt": lowercased,
// accents stripped, BERT's whitespace and punctuation split, BPE whose word-final symbols
// end in "</w>"), for tests/test_tokenizer_gpt1.cpp to match exactly:
//
//   tests/fixtures/tokenizer/gpt1/{vocab.json,merges.txt,tokenizer.json}: a GPT-1-style
//     BPE of 400 tokens trained here on a few paragraphs (the real one, 40478 tokens, is
//     not reachable offline), laid out as openai-gpt's: single characters, then the same
//     with "</w>", then one token per merge, then "<unk>".
//   tests/fixtures/tokenizer/gpt1/cases.json: texts and their ids (25 written below, 300
//     random ones from a seeded generator), one case a line.
//   tests/fixtures/formats/gpt1_snapshot/{vocab.json,merges.txt}: a 97-token one for the
//     97-token GPT-1 snapshot there, so generate runs on it end to end, and text_ids.json:
//     a text and its ids there.
//
// References, as for GPT-2's fixtures (tools/make_tokenizer_fixtures.js):
//  1. @huggingface/tokenizers 0.2.0 (npm; Hugging Face's JavaScript port of `tokenizers`),
//     loading the tokenizer.json written here, which is what transformers'
//     OpenAIGPTConverter builds: BertNormalizer(lowercase), BertPreTokenizer, BPE with
//     unk "<unk>" and end_of_word_suffix "</w>".
//  2. tools/gpt1_reference_tokenizer.py: the Rust crate's rules (which transformers' fast
//     tokenizer runs) on Python's unicodedata.
// They agree except where the JavaScript port departs from the crate: it pads CJK
// ideographs above U+FFFF with no spaces (it reads UTF-16 units), and it always takes
// "<unk>" in the text for the token (the crate does as an added special token; gpt-vk,
// as for GPT-2's "<|endoftext|>", encodes it as text). For those texts ("python_only")
// the fixture holds the Python ids, which gpt-vk follows, and the JS ids for the record.
//
// Run from anywhere (npm ci in tools/ first): node tools/make_gpt1_tokenizer_fixtures.js
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { Tokenizer } = require('@huggingface/tokenizers');

const root = path.resolve(__dirname, '..');
const outDir = path.join(root, 'tests', 'fixtures', 'tokenizer', 'gpt1');
const snapshotDir = path.join(root, 'tests', 'fixtures', 'formats', 'gpt1_snapshot');
const EOW = '</w>';

const corpus = [
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want ' +
    'of a wife. However little known the feelings or views of such a man may be on his first entering a ' +
    'neighbourhood, this truth is so well fixed in the minds of the surrounding families, that he is considered ' +
    'the rightful property of some one or other of their daughters.',
  '"My dear Mr. Bennet," said his lady to him one day, "have you heard that Netherfield Park is let at last?" ' +
    'Mr. Bennet replied that he had not. "But it is," returned she; "for Mrs. Long has just been here, and she ' +
    'told me all about it." Mr. Bennet made no answer. "Do you not want to know who has taken it?" cried his wife ' +
    'impatiently. "You want to tell me, and I have no objection to hearing it." This was invitation enough.',
  'The café served crème brûlée; the naïve Ångström fan paid 12.50 (or €13) — 100% worth it! ' +
    'Numbers: 1, 22, 333, 4444. Symbols: $5 + 3 = 8 < 9 > 7 ^ ~ | @ # & * _ ` [brackets] {braces} \\ / ' +
    '漢字 中文 日本語 東京',
];

// Texts to tokenize: [name, text].
const cases = [
  ['english', 'It is a truth universally acknowledged, that a single man must be in want of a wife.'],
  ['capitals', 'HELLO World, MR. BENNET SAID: "NO!"'],
  ['punctuation_runs', 'wait... what?!? (yes) [no] {maybe} --- "quoted" \'single\' don\'t it\'s'],
  ['ascii_symbols', 'a+b=c; x<y>z; 50% of $10 is $5; a|b~c^d`e@f#g&h*i_j\\k/l'],
  ['digits', '12.50 3,000 1859 42nd 0xFF'],
  ['accents', 'Café crème brûlée, naïve Ångström, Éire, São Paulo, Zoë, façade, jalapeño'],
  ['cjk', '漢字と中文、日本語の東京。你好世界'],
  ['cjk_compat', '豈 更 車'],
  ['whitespace_kinds', 'tab\there new\nline\r\nreturn nbsp\u00a0space em\u2003space ideographic\u3000space'],
  ['control_and_format', 'zero\u200bwidth soft\u00adhyphen bell\u0007 nul\u0000 bom\ufeffmark rtl\u200fmark'],
  ['replacement_char', 'bad\ufffdbyte and \ufffd alone'],
  ['unknown_letters', 'Ελληνικά и русский текст ok'],
  ['emoji', 'good 😀 day 👍🏽 yes'],
  ['leading_trailing_space', '   spaced   out   '],
  ['only_spaces', '    '],
  ['empty', ''],
  ['one_char', 'a'],
  ['long_word', 'supercalifragilisticexpialidocious antidisestablishmentarianism'],
  ['repeated_letters', 'aaaaaaaaaaaaaaaaaaaaaaa eeeeeeeee ssssss'],
  ['special_lookalike', '<unk> </w> <|endoftext|>'],
  ['turkish_dotted_i', 'İstanbul ıi İI'],
  ['sharp_s_and_ligatures', 'Straße ﬁne ﬂow Æsir œuvre'],
  ['fullwidth', 'ＡＢＣ１２３！'],
  ['greek_final_sigma', 'ΟΔΟΣ ΣΑΣ'],
  ['cjk_extension_b', 'ext 𠀀𠀁 b'],
];

// Random texts from a seeded generator (xorshift32), over characters of every kind the
// normalizer treats apart, all assigned long before the references' Unicode versions.
function randomCases(count) {
  const pool = [...'abcdefghijklmnopqrstuvwxyzTHEABC0123456789.,;:!?\'"()[]{}<>-_$+=^`|~@#&*%/\\',
    ' ', ' ', ' ', '\t', '\n', '\r', '\u00a0', '\u2003', '\u3000', '\u2028', '\u0000', '\u0007', '\u0085',
    '\u200b', '\u00ad', '\ufeff', '\ufffd', '\ue000', 'é', 'Å', 'ñ', 'ü', 'ç', 'İ', 'ı', 'ß', 'Æ', '\u0301',
    '\u0308', '\u0327', 'Σ', 'α', 'ω', 'Ж', 'я', '漢', '字', '中', '豈', '𠀀', '😀', '👍', 'Ａ', '１', '—', '–', '…',
    '«', '»', '¿', '¡', '、', '。', '‘', '’', '“', '”', '±', '×', '÷', '∑', '€', '£', '©', '\u3042', '\u30a2',
    '\uac00', 'ﬁ'];
  let x = 20261205;
  const next = () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
  const out = [];
  for (let i = 0; i < count; ++i) {
    const n = 1 + (next() % 40);
    let t = '';
    for (let k = 0; k < n; ++k) t += pool[next() % pool.length];
    out.push(['random_' + i, t]);
  }
  return out;
}

// A GPT-1-style BPE: symbols are characters, a word's last symbol carries "</w>"; each
// round merges the most frequent adjacent pair (ties: the smaller pair by code units).
function trainBpe(words, maxVocab, alphabetFilter) {
  const counts = new Map();
  for (const w of words) counts.set(w, (counts.get(w) || 0) + 1);
  const seqs = [];
  const chars = new Set();
  for (const [w, n] of counts) {
    const cs = [...w];
    if (!cs.every(alphabetFilter)) continue;
    cs.forEach((c) => chars.add(c));
    seqs.push({ syms: cs.map((c, i) => (i === cs.length - 1 ? c + EOW : c)), n });
  }
  const base = [...chars].sort();
  const vocab = [...base, ...base.map((c) => c + EOW)];
  const merges = [];
  while (vocab.length + 1 < maxVocab) {
    const pairs = new Map();
    for (const { syms, n } of seqs)
      for (let i = 0; i + 1 < syms.length; ++i) {
        const k = syms[i] + ' ' + syms[i + 1];
        pairs.set(k, (pairs.get(k) || 0) + n);
      }
    let best = null;
    for (const [k, n] of pairs) if (!best || n > best[1] || (n === best[1] && k < best[0])) best = [k, n];
    if (!best) break;
    const [l, r] = best[0].split(' ');
    merges.push([l, r]);
    vocab.push(l + r);
    for (const s of seqs) {
      const out = [];
      for (let i = 0; i < s.syms.length; ++i) {
        if (i + 1 < s.syms.length && s.syms[i] === l && s.syms[i + 1] === r) out.push(l + r), ++i;
        else out.push(s.syms[i]);
      }
      s.syms = out;
    }
  }
  vocab.push('<unk>');
  return { vocab: Object.fromEntries(vocab.map((t, i) => [t, i])), merges };
}

// What transformers' OpenAIGPTConverter builds from vocab.json and merges.txt.
function tokenizerJson({ vocab, merges }) {
  return {
    version: '1.0',
    added_tokens: [{ id: vocab['<unk>'], content: '<unk>', single_word: false, lstrip: false, rstrip: false,
      normalized: false, special: true }],
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null,
      lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: null,
    decoder: { type: 'BPEDecoder', suffix: EOW },
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: '',
      end_of_word_suffix: EOW, fuse_unk: false, vocab, merges: merges.map(([l, r]) => l + ' ' + r) },
  };
}

function writeTokenizer(dir, bpe, withJson) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'vocab.json'), JSON.stringify(bpe.vocab) + '\n');
  fs.writeFileSync(path.join(dir, 'merges.txt'), '#version: 0.2\n' + bpe.merges.map((m) => m.join(' ')).join('\n') + '\n');
  if (withJson) fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson(bpe), null, 1) + '\n');
}

function words(tok, text) {
  return tok.pre_tokenizer(tok.normalizer(text));
}

function pythonIds(dir, texts) {
  const r = spawnSync('python3', [path.join(__dirname, 'gpt1_reference_tokenizer.py'), dir],
    { input: JSON.stringify(texts), encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error('gpt1_reference_tokenizer.py failed: ' + r.stderr);
  return JSON.parse(r.stdout);
}

function main() {
  const shape = tokenizerJson({ vocab: { '<unk>': 0 }, merges: [] });
  const bare = new Tokenizer(shape, {});
  const corpusWords = corpus.flatMap((t) => words(bare, t));

  const bpe = trainBpe(corpusWords, 400, () => true);
  writeTokenizer(outDir, bpe, true);
  const small = trainBpe(corpusWords, 97, (c) => /^[a-z]$/.test(c));
  writeTokenizer(snapshotDir, small, false);

  const tok = new Tokenizer(tokenizerJson(bpe), {});
  const all = [...cases, ...randomCases(300)];
  const py = pythonIds(outDir, all.map(([, text]) => text));
  const out = all.map(([name, text], i) => {
    const js = tok.encode(text, { add_special_tokens: false }).ids;
    const same = JSON.stringify(js) === JSON.stringify(py[i]);
    const c = { name, text, ids: py[i] };
    if (!same) Object.assign(c, { python_only: true, js_ids: js });
    return c;
  });
  const doc = { generator: 'tools/make_gpt1_tokenizer_fixtures.js', vocab: 'vocab.json + merges.txt here', cases: out };
  const lines = out.map((c) => '  ' + JSON.stringify(c)).join(',\n');
  fs.writeFileSync(path.join(outDir, 'cases.json'),
    `{"generator": ${JSON.stringify(doc.generator)}, "vocab": ${JSON.stringify(doc.vocab)}, "cases": [\n${lines}\n]}\n`);
  const snapshotText = 'The theater, then: it is in the neighbourhood!';
  const snapshotIds = new Tokenizer(tokenizerJson(small), {}).encode(snapshotText, { add_special_tokens: false }).ids;
  const snapshotPy = pythonIds(snapshotDir, [snapshotText])[0];
  if (JSON.stringify(snapshotIds) !== JSON.stringify(snapshotPy)) throw new Error('the references differ on the snapshot text');
  fs.writeFileSync(path.join(snapshotDir, 'text_ids.json'), JSON.stringify({ text: snapshotText, ids: snapshotIds }) + '\n');
  const differ = out.filter((c) => c.python_only).map((c) => c.name);
  console.log(`wrote ${out.length} cases (${Object.keys(bpe.vocab).length} tokens; ` +
    `${Object.keys(small.vocab).length} for the snapshot); JS differs on: ${differ.join(', ') || 'none'}`);
}

main();
