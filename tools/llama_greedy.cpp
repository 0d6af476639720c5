// llama.cpp greedy decoding of a prompt on one GGUF (its CPU backend), printing the prompt's
// token ids, "|", then the generated ids: the reference for tools/compare_greedy_llama.sh.
// Build (after tools/build_llama_quantize.sh DIR):
//   g++ -O1 -std=c++17 -IDIR/llama.cpp/include -IDIR/llama.cpp/ggml/include tools/llama_greedy.cpp \
//     -LDIR/bin -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -lggml-base -Wl,-rpath,DIR/bin -o DIR/bin/llama-greedy
// Usage: llama-greedy MODEL.gguf PROMPT N   (LLAMA_BIN=DIR/bin for the backends; LOG=1: llama.cpp's log)
#include "llama.h"
#include "ggml-backend.h"
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const char* path = argv[1];
  std::string prompt = argv[2];
  int n_gen = atoi(argv[3]);
  if (!getenv("LOG")) llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  ggml_backend_load_all_from_path(getenv("LLAMA_BIN") ? getenv("LLAMA_BIN") : ".");
  auto mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path, mp);
  if (!model) { fprintf(stderr, "load failed\n"); return 1; }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  std::vector<llama_token> toks(prompt.size() + 8);
  int n = llama_tokenize(vocab, prompt.c_str(), prompt.size(), toks.data(), toks.size(), false, false);
  toks.resize(n);
  auto cp = llama_context_default_params();
  cp.n_ctx = 64; cp.n_batch = 64; cp.n_threads = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  for (auto t : toks) printf("%d ", t);
  printf("|");
  llama_batch batch = llama_batch_get_one(toks.data(), toks.size());
  const int V = llama_vocab_n_tokens(vocab);
  llama_token next = 0;  // the batch of a decode step points at it
  for (int i = 0; i < n_gen; ++i) {
    if (llama_decode(ctx, batch)) { fprintf(stderr, "decode failed\n"); return 1; }
    const float* logits = llama_get_logits_ith(ctx, -1);
    llama_token best = 0;
    for (int v = 1; v < V; ++v) if (logits[v] > logits[best]) best = v;
    printf(" %d", best);
    next = best;
    batch = llama_batch_get_one(&next, 1);
  }
  printf("\n");
  return 0;
}
