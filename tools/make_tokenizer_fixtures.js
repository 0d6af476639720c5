#!/usr/bin/env node
// Writes tests/fixtures/tokenizer/{cases,long_text}.json: texts and the GPT-2 token ids
// that reference encoders give for them, for tests/test_tokenizer.cpp to match exactly.
//
// References:
//  1. the npm package gpt-3-encoder 1.1.4 (a JavaScript port of OpenAI's encoder.py; its
//     pattern is a /u regex with real \p{L} and \p{N}): `npm install` in tools/ first.
//  2. tools/gpt2_reference_encoder.py: encoder.py itself on Python's `regex` module
//     (Debian: python3-regex), which is what GPT-2 was made with.
// Every text is run through both. They agree except where JavaScript's \s differs from
// Python regex's: JS counts U+FEFF as whitespace and not U+0085 (NEL), regex the reverse
// (the Unicode White_Space property). For those texts ("reference": "python-regex") the
// fixture holds the Python ids, which gpt-vk follows, and the JS ids ("gpt3_encoder_ids")
// for the record. Unicode versions
// differ too (Node's \p{L} knows newer letters than PCRE2 10.42's Unicode 14), so texts
// here use only characters assigned long before Unicode 14.
//
// The long text (> 100 KB) is not stored: it is rebuilt from these cases by a seeded
// generator that the C++ test repeats (xorshift32, see longText below); the fixture holds
// its length, its FNV-1a hash (so a diverging rebuild is caught as such) and its ids.
// Takes about half a minute: gpt-3-encoder's encode is quadratic in the number of tokens.
//
// Run from anywhere: node tools/make_tokenizer_fixtures.js
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { encode } = require('gpt-3-encoder');

const root = path.resolve(__dirname, '..');
const outDir = path.join(root, 'tests', 'fixtures', 'tokenizer');

const rep = (s, n) => s.repeat(n);

// [name, text, python_only]
const cases = [
  ['english', 'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times; ' +
    'a tale of two cities (1859) by Charles Dickens. "Hello," she said -- and then: "Goodbye!"'],
  ['prose_paragraphs', 'It is a truth universally acknowledged, that a single man in possession of a good fortune, ' +
    'must be in want of a wife.\n\nHowever little known the feelings or views of such a man may be on his first ' +
    'entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families.\n'],
  ['code_cpp', '#include <vector>\n\nint main(int argc, char** argv) {\n    std::vector<int> v{1, 2, 3};\n' +
    '    for (auto& x : v) x *= 2;  // double\n\treturn v.size() > 2 ? 0 : -1;\n}\n'],
  ['code_python', 'def f(x):\n    """Docstring."""\n    if x <= 0:\n        return [i**2 for i in range(10)]\n' +
    '    return {"a": x, \'b\': None}\n\n\nprint(f(-1))  # -> [0, 1, 4, ...]\n'],
  ['numbers', '3.14159 1,000,000 2024-01-15 0x1F 1e-9 -42 +7 12345678901234567890 007 ' +
    '\u0663\u0664\u0665 \u0967\u0968\u0969 \u00bd \u2167 \u00b2 \u2460 $19.99 50% 1/3'],
  ['contractions', "I'm you're we've he'll she'd it's don't can't won't Y'ALL'S I'M 'tis o'clock " +
    "rock'n'roll ''s 's't 're've'm'll'd ' s"],
  ['spaces_runs', 'a  b   c    d\n\n\ne\t\tf \t \n  g\r\n h\u00a0\u00a0i\u3000j \u2028k\u2029l'],
  ['trailing_spaces', 'ends with spaces   '],
  ['trailing_newlines', 'ends with newlines\n\n'],
  ['trailing_tabs', 'tabs\t\t'],
  ['leading_whitespace', '   \n\tleading whitespace'],
  ['only_whitespace', ' \n \t\t\n\n   '],
  ['empty', ''],
  ['single_space', ' '],
  ['single_letter', 'a'],
  ['chinese', '\u4e2d\u534e\u4eba\u6c11\u5171\u548c\u56fd\u6210\u7acb\u4e8e1949\u5e74\u3002\u6211\u7231\u5317\u4eac' +
    '\u5929\u5b89\u95e8\uff0c\u5929\u5b89\u95e8\u4e0a\u592a\u9633\u5347\u3002 \u4eca\u5929\u5929\u6c14\u5f88\u597d' +
    '\uff01\u4f60\u5403\u996d\u4e86\u5417\uff1f'],
  ['russian', '\u0412 \u043d\u0430\u0447\u0430\u043b\u0435 \u0431\u044b\u043b\u043e \u0421\u043b\u043e\u0432\u043e. ' +
    '\u041c\u043e\u0441\u043a\u0432\u0430 \u2014 \u0441\u0442\u043e\u043b\u0438\u0446\u0430 \u0420\u043e\u0441\u0441' +
    '\u0438\u0438, \u0451\u0436\u0438\u043a \u0438 \u0415\u0401 \u0432 2023 \u0433\u043e\u0434\u0443!'],
  ['arabic', '\u0627\u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u062c\u0645\u064a\u0644\u0629' +
    '\u060c \u0645\u064e\u0631\u0652\u062d\u064e\u0628\u064b\u0627 \u0628\u0650\u0643\u064f\u0645\u0652! \u0661\u0662' +
    '\u0663 \u061f'],
  ['hindi', '\u0939\u093f\u0928\u094d\u0926\u0940 \u092d\u093e\u0930\u0924 \u0915\u0940 \u0930\u093e\u091c\u092d' +
    '\u093e\u0937\u093e \u0939\u0948\u0964 \u0928\u092e\u0938\u094d\u0924\u0947, \u0906\u092a \u0915\u0948\u0938\u0947' +
    ' \u0939\u0948\u0902?'],
  ['emoji_zwj', 'family \u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466} thumbs \u{1F44D}\u{1F3FD} flag ' +
    '\u{1F3F3}\uFE0F\u200D\u{1F308} heart \u2764\uFE0F US \u{1F1FA}\u{1F1F8}\u{1F600}\u{1F600}!'],
  ['combining_marks', 'e\u0301 n\u0303 caf\u00e9 cafe\u0301 Z\u0324\u0342a\u0336l\u0337g\u0334o \u1e9b\u0323 ' +
    'a\u0300\u0301\u0302\u0303\u0304'],
  ['mixed_scripts', 'Tokyo \u6771\u4eac (\u3068\u3046\u304d\u3087\u3046) \u2192 Seoul \uc11c\uc6b8; Athens ' +
    '\u0391\u03b8\u03ae\u03bd\u03b1; Tel Aviv \u05ea\u05dc \u05d0\u05d1\u05d9\u05d1; \u0e01\u0e23\u0e38\u0e07\u0e40' +
    '\u0e17\u0e1e'],
  ['punctuation_symbols', 'Hello!!! ... ??? --- ==> <=> \u2018smart\u2019 \u201cquotes\u201d \u2014 \u00abfr\u00bb ' +
    '\u00a9\u00ae\u2122 \u20ac100 \u00a5 @user #tag a_b c-d e.f'],
  ['endoftext_as_text', 'first document<|endoftext|>second document <|endoftext|> third'],
  ['control_chars', 'bell\u0007 nul\u0000 esc\u001b[0m del\u007f \u001c\u001d\u001e\u001f vt\u000b ff\u000c'],
  ['mongolian_vowel_separator', 'a\u180eb a \u180eb \u180e c'],
  ['long_chinese_run', rep('\u6211\u4eec\u5b66\u4e60\u4e2d\u6587\u5b57\u7b26\u4e32', 120)],
  ['long_space_run', rep(' ', 3000) + 'x' + rep('\n', 500) + 'y' + rep('\t ', 400)],
  ['long_digit_run', rep('1234567890', 300)],
  ['long_symbol_run', rep('=-+*', 500) + ' ' + rep('!?', 500)],
  ['long_word', 'pneumonoultramicroscopicsilicovolcanoconiosis ' + rep('abcdefghij', 200)],
  ['nel_whitespace', 'line \u0085next!\u0085\u0085? a \u0085b.\u0085\n', true],
  ['bom_not_whitespace', '\ufeffstart of file a \ufeffb \ufeff\ufeff.', true],
];

function pythonIds(texts) {
  const py = spawnSync('/usr/bin/python3', [path.join(__dirname, 'gpt2_reference_encoder.py'),
    path.join(root, 'models', 'gpt2-tokenizer', 'encoder.json'),
    path.join(root, 'models', 'gpt2-tokenizer', 'vocab.bpe')],
  { input: JSON.stringify(texts), maxBuffer: 1 << 28 });
  if (py.status !== 0) throw new Error('python reference failed: ' + py.stderr.toString());
  return JSON.parse(py.stdout.toString());
}

// The long text: pieces of the short cases where both references agree (split at ASCII spaces) joined by seeded
// separators until it passes minBytes of UTF-8. tests/test_tokenizer.cpp repeats this.
const kSeparators = [' ', ' ', ' ', ' ', '  ', '\n', '\n\n', '\t', ', ', '. ', '   \n'];
function longText(seed, minBytes) {
  let x = seed >>> 0;
  const next = () => {
    x ^= x << 13; x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5; x >>>= 0;
    return x;
  };
  const pieces = [];
  for (const [name, text, pythonOnly] of cases) {
    if (name.startsWith('long_') || pythonOnly) continue;
    for (const p of text.split(' ')) if (p.length) pieces.push(p);
  }
  let out = '';
  let bytes = 0;
  while (bytes < minBytes) {
    const p = pieces[next() % pieces.length] + kSeparators[next() % kSeparators.length];
    out += p;
    bytes += Buffer.byteLength(p, 'utf8');
  }
  return out;
}

function fnv1a64(buf) {
  let h = 0xcbf29ce484222325n;
  for (const b of buf) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return h.toString(16).padStart(16, '0');
}

function main() {
  const texts = cases.map((c) => c[1]);
  const kSeed = 20240601, kMinBytes = 100 * 1024 + 1;
  const long = longText(kSeed, kMinBytes);
  const py = pythonIds(texts.concat([long]));
  const same = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

  const out = [];
  cases.forEach(([name, text, pythonOnly], i) => {
    const js = encode(text);
    if (!pythonOnly && !same(js, py[i])) throw new Error(`references disagree on '${name}'`);
    if (pythonOnly && same(js, py[i])) throw new Error(`'${name}' was expected to differ between references`);
    const entry = { name, text, ids: py[i] };
    if (pythonOnly) {
      entry.reference = 'python-regex';
      entry.gpt3_encoder_ids = js;
    } else {
      entry.reference = 'gpt-3-encoder and python-regex';
    }
    out.push(entry);
  });

  const longJs = encode(long);
  if (!same(longJs, py[py.length - 1])) throw new Error('references disagree on the long text');
  const longBytes = Buffer.from(long, 'utf8');
  fs.mkdirSync(outDir, { recursive: true });
  // Readable JSON with each id list on one line.
  const isIds = (v) => Array.isArray(v) && v.every((n) => typeof n === 'number');
  const pretty = (o) => JSON.stringify(o, (k, v) => (isIds(v) ? JSON.stringify(v) : v), 2)
    .replace(/"(\[[0-9,]*\])"/g, '$1') + '\n';
  // The long text's ~55k ids as little-endian uint16 in base64 (GPT-2's ids are below
  // 65536), a third of the size of a JSON list.
  const longIds = py[py.length - 1];
  if (longIds.some((id) => id > 0xffff)) throw new Error('an id does not fit 16 bits');
  const u16 = Buffer.alloc(longIds.length * 2);
  longIds.forEach((id, i) => u16.writeUInt16LE(id, 2 * i));
  fs.writeFileSync(path.join(outDir, 'cases.json'), pretty({
    generator: 'tools/make_tokenizer_fixtures.js',
    vocab: 'models/gpt2-tokenizer/encoder.json + vocab.bpe',
    cases: out,
  }));
  fs.writeFileSync(path.join(outDir, 'long_text.json'), pretty({
    generator: 'tools/make_tokenizer_fixtures.js (longText)',
    seed: kSeed,
    min_bytes: kMinBytes,
    bytes: longBytes.length,
    fnv1a64: fnv1a64(longBytes),
    n_ids: longIds.length,
    ids_u16le_base64: u16.toString('base64'),
  }));
  console.log(`wrote ${out.length} cases and a ${longBytes.length}-byte long text ` +
    `(${py[py.length - 1].length} ids) to ${path.relative(process.cwd(), outDir) || '.'}`);
}

main();
