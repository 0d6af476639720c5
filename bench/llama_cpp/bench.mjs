#!/usr/bin/env node
// llama.cpp's prefill and decode throughput on a GGUF model (bench/llama_cpp/to_gguf.py),
// through node-llama-cpp's prebuilt llama.cpp binaries, with the protocol of `gpt-vk bench`:
// each run clears the KV cache, prefills --prompt-tokens random token ids (up to and
// including the greedy pick of the first new token), then decodes --gen-tokens more
// greedily; one warm-up run (ggml-vulkan compiles its pipelines, lavapipe JIT-compiles them
// at first use), then --repeats measured runs; the medians are printed on the last line as
// `prefill_tok_s=... decode_tok_s=...`, the line bench/bench_proc.py reads.
//
// Usage: node bench.mjs --model FILE.gguf [--backend vulkan|cpu] [--prompt-tokens 128]
//          [--gen-tokens 64] [--repeats 3] [--threads 2] [--flash-attn auto|on|off] [--log]
//        node bench.mjs --model FILE.gguf --check-ids 464,2068,318 [--backend ...]
//          prints the greedy continuation and each pick's probability as JSON
//          (bench/llama_cpp/check_same_model.py compares it with `gpt-vk forward`)
//
// --backend vulkan offloads every layer to the Vulkan device; llama.cpp's Vulkan backend
// skips devices of type CPU unless GGML_VK_VISIBLE_DEVICES names them, so this sets it to 0
// (lavapipe, the only device here) when unset. --backend cpu loads node-llama-cpp's CPU-only
// binary (@node-llama-cpp/linux-x64): with the Vulkan binary and no offloaded layers,
// llama.cpp would still hand large prefill matrix products to the Vulkan device.
import {existsSync, readFileSync} from "node:fs";
import {parseArgs} from "node:util";

const die = (msg) => { process.stderr.write(`llama-cpp bench: ${msg}\n`); process.exit(1); };
// errors are one line on stderr, exit status 1 (as gpt-vk's), not a stack trace
process.on("uncaughtException", (e) => die(String(e?.message ?? e).split("\n")[0]));

const {values: opt} = parseArgs({
  options: {
    model: {type: "string"},
    backend: {type: "string", default: "vulkan"},
    "prompt-tokens": {type: "string", default: "128"},
    "gen-tokens": {type: "string", default: "64"},
    repeats: {type: "string", default: "3"},
    threads: {type: "string", default: "2"},
    "flash-attn": {type: "string", default: "auto"},
    "check-ids": {type: "string"},
    log: {type: "boolean", default: false},
    help: {type: "boolean", short: "h", default: false},
  },
});
if (opt.help) {  // the usage block of this file's header
  const lines = readFileSync(new URL(import.meta.url), "utf8").split("\n").slice(1);
  const header = lines.slice(0, lines.findIndex((l) => !l.startsWith("//")));
  process.stdout.write(header.map((l) => l.slice(3)).join("\n") + "\n");
  process.exit(0);
}
if (!opt.model) die("--model FILE.gguf is required");
if (!existsSync(opt.model)) die(`${opt.model}: no such file (bench/llama_cpp/to_gguf.py writes it)`);
if (!["vulkan", "cpu"].includes(opt.backend)) die("--backend is vulkan or cpu");
const promptTokens = Number(opt["prompt-tokens"]), genTokens = Number(opt["gen-tokens"]);
const repeats = Number(opt.repeats), threads = Number(opt.threads);
if (![promptTokens, genTokens, repeats, threads].every((n) => Number.isInteger(n) && n >= 1))
  die("--prompt-tokens, --gen-tokens, --repeats and --threads must be positive integers");
const flashAttention = {auto: "auto", on: true, off: false}[opt["flash-attn"]];
if (flashAttention === undefined) die("--flash-attn is auto, on or off");
if (opt.backend === "vulkan") process.env.GGML_VK_VISIBLE_DEVICES ??= "0";

let nlc;
try {
  nlc = await import("node-llama-cpp");
} catch (e) {
  die(`node-llama-cpp is not installed (cd bench/llama_cpp && npm install --omit=optional --ignore-scripts): ${e.message}`);
}
const {getLlama, LlamaLogLevel} = nlc;

// llama.cpp's log (one line per call, without its newline), kept for the lines that show
// where the model runs; all of it on stderr with --log
const logLines = [];
const logger = (level, message) => {
  if (opt.log) process.stderr.write(`[${level}] ${message}\n`);
  logLines.push(message.trim());
};
const PLACEMENT = [/using device /, /offloaded \d+\/\d+ layers/, /model buffer size/,
  /KV buffer size/, /compute buffer size/, /graph splits|splits = /, /flash_attn\s+=/, /n_threads|CPU backend/];

const median = (v) => { const s = [...v].sort((a, b) => a - b), n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };

const llama = await getLlama({
  gpu: opt.backend === "vulkan" ? "vulkan" : false,
  build: "never", skipDownload: true,  // use the prebuilt binary or fail; never compile llama.cpp
  logLevel: LlamaLogLevel.log, logger,  // "log" level: includes which CPU backend variant loaded
});
if (opt.backend === "vulkan" && llama.gpu !== "vulkan") die(`got gpu ${llama.gpu}, not vulkan`);
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: opt.backend === "vulkan" ? "max" : 0});
if (opt.backend === "vulkan" && model.gpuLayers < model.fileInsights.totalLayers)
  die(`only ${model.gpuLayers} of ${model.fileInsights.totalLayers} layers offloaded to the Vulkan device`);
const trainContext = model.trainContextSize;
if (promptTokens + genTokens > trainContext) die(`prompt + generated tokens pass the ${trainContext}-token context`);
// the model's whole context, as gpt-vk allocates its KV cache; the prompt is one batch
const context = await model.createContext({contextSize: trainContext, batchSize: Math.max(512, promptTokens),
  threads: {ideal: threads, min: threads}, flashAttention});
const sequence = context.getSequence();

if (opt["check-ids"]) {
  const ids = opt["check-ids"].split(",").map(Number);
  const picks = [];
  for await (const out of sequence.evaluateWithMetadata(ids, {probabilities: true}, {temperature: 0})) {
    picks.push({token: out.token, probability: out.probabilities.get(out.token)});
    if (picks.length >= genTokens) break;
  }
  console.log(JSON.stringify({backend: opt.backend, prompt: ids, picks}));
} else {
  // random prompt ids from a fixed seed (speed does not depend on which ids)
  let state = 1234;
  const nextId = () => { state = (state * 1103515245 + 12345) % 2147483648; return state % model.tokens.eos; };
  const prompt = Array.from({length: promptTokens}, nextId);
  const prefill = [], decode = [];
  for (let run = 0; run <= repeats; run++) {
    await sequence.clearHistory();
    let produced = 0, t1 = 0;
    const t0 = performance.now();
    // temperature 0: greedy; the generator evaluates the next token only when asked for it,
    // so stopping at the last yield times exactly genTokens decode steps
    for await (const _ of sequence.evaluate(prompt, {temperature: 0})) {
      if (produced++ === 0) t1 = performance.now();
      if (produced > genTokens) break;
    }
    const t2 = performance.now();
    if (run === 0) {
      process.stderr.write(`warm-up: prefill ${((t1 - t0) / 1000).toFixed(2)} s, decode ${((t2 - t1) / 1000).toFixed(2)} s\n`);
      continue;
    }
    prefill.push(promptTokens / ((t1 - t0) / 1000));
    decode.push(genTokens / ((t2 - t1) / 1000));
  }
  const placement = [...new Set(logLines.filter((l) => PLACEMENT.some((re) => re.test(l))))];
  const device = opt.backend === "vulkan" ? (await llama.getGpuDeviceNames()).join(", ") : "the CPU";
  const nlcVersion = JSON.parse(readFileSync(new URL("node_modules/node-llama-cpp/package.json", import.meta.url))).version;
  // placement first, then the summary and the two rates: bench/sweeps/run_bench.py keeps the last 4 lines
  process.stderr.write(placement.map((l) => `  ${l}\n`).join("") +
    `llama.cpp ${llama.llamaCppRelease.release} (node-llama-cpp ${nlcVersion}, ${llama.buildType}), ${opt.backend} backend on ` +
    `${device}, ${model.gpuLayers}/${model.fileInsights.totalLayers} layers on the GPU, ${context.currentThreads} threads\n`);
  const p = median(prefill), d = median(decode);
  process.stderr.write(`prefill ${promptTokens} tokens: median ${p.toFixed(1)} tok/s (min ${Math.min(...prefill).toFixed(1)}, ` +
    `max ${Math.max(...prefill).toFixed(1)}) over ${repeats} runs\n`);
  process.stderr.write(`decode ${genTokens} tokens at depth ${promptTokens}: median ${d.toFixed(2)} tok/s ` +
    `(min ${Math.min(...decode).toFixed(2)}, max ${Math.max(...decode).toFixed(2)})\n`);
  console.log(`prefill_tok_s=${p.toFixed(3)} decode_tok_s=${d.toFixed(3)}`);
}
await context.dispose();
await model.dispose();
await llama.dispose();
