#!/usr/bin/env node
// Encode throughput of the reference encoder (npm gpt-3-encoder, installed in
// tools/node_modules), for bench/peers/tokenizer_bench.sh.
// Usage: node tokenizer_bench_reference.js TEXT_FILE
// Prints one line of key=value pairs like tokenizer_bench.cpp: bytes, tokens, cold_mb_s
// (first pass, empty word cache), warm_mb_s (second pass), their wall-clock versions, and
// ids_fnv (FNV-1a over the ids as decimal text separated by spaces).
//
// gpt-3-encoder's encode() concatenates arrays once per piece, so one call is quadratic in
// its number of tokens (a megabyte takes minutes). To measure its per-piece speed rather
// than that, the text is fed in chunks of ~256 bytes cut between an ASCII letter and ASCII
// punctuation, where GPT-2's pattern always cuts too: the ids are those of the whole text,
// which the shell script checks against gpt-vk's.
'use strict';
const fs = require('fs');
const path = require('path');
const { encode } = require(path.join(__dirname, '..', '..', 'tools', 'node_modules', 'gpt-3-encoder'));

const text = fs.readFileSync(process.argv[2], 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');
const isLetter = (c) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
const isPunct = (c) => (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
const chunks = [];
let start = 0;
for (let i = 1; i < text.length; i++) {
  if (i - start >= 256 && isLetter(text.charCodeAt(i - 1)) && isPunct(text.charCodeAt(i))) {
    chunks.push(text.slice(start, i));
    start = i;
  }
}
chunks.push(text.slice(start));

function pass() {
  const cpu0 = process.cpuUsage();
  const wall0 = process.hrtime.bigint();
  const out = [];
  for (const c of chunks) out.push(encode(c));
  const cpu = process.cpuUsage(cpu0);
  return { out, cpu_s: (cpu.user + cpu.system) / 1e6, wall_s: Number(process.hrtime.bigint() - wall0) / 1e9 };
}

const cold = pass();
const warm = pass();
let h = 0xcbf29ce484222325n;
let tokens = 0;
const mix = (s) => { for (let i = 0; i < s.length; i++) h = BigInt.asUintN(64, (h ^ BigInt(s.charCodeAt(i))) * 0x100000001b3n); };
for (const ids of cold.out) {
  for (const id of ids) {
    if (id === undefined) throw new Error('gpt-3-encoder produced an undefined id');
    mix((tokens ? ' ' : '') + id);
    tokens++;
  }
}
const mbs = (s) => (bytes / 1e6 / s).toFixed(3);
console.log(`bytes=${bytes} tokens=${tokens} cold_mb_s=${mbs(cold.cpu_s)} warm_mb_s=${mbs(warm.cpu_s)} ` +
  `cold_wall_mb_s=${mbs(cold.wall_s)} warm_wall_mb_s=${mbs(warm.wall_s)} ids_fnv=${h.toString(16).padStart(16, '0')}`);
