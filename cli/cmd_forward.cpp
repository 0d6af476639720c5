// `gpt-vk forward`: one forward pass over given token ids; writes the logits of every
// position to a .npy file ([T, vocab_size], little-endian float32).

#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/model_session.hpp"
#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/npy.hpp"
#include "models/tokenizer/id_list.hpp"

namespace gptvk::cli {

namespace {

// A typo that names an input as --out would replace it with logits.
void refuse_overwriting_inputs(const std::string& out, const ModelConfig& cfg, const ModelFlags& flags) {
  const std::pair<const char*, const std::string*> inputs[] = {{"config", &cfg.source},
                                                               {"weights", &cfg.weights_file},
                                                               {"weights", &flags.weights},
                                                               {"tokenizer vocabulary", &cfg.tokenizer_vocab},
                                                               {"tokenizer merges", &cfg.tokenizer_merges}};
  for (const auto& [what, path] : inputs) {
    std::error_code ec;
    if (!path->empty() && std::filesystem::equivalent(out, *path, ec))
      throw InputError("--out " + out + " is the model's " + what + " file: refusing to overwrite it");
  }
  // A snapshot's weights are files of its folder (model.safetensors, shards, an index).
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(out).parent_path();
  if (std::filesystem::is_directory(cfg.weights_file, ec) && std::filesystem::exists(out, ec) &&
      std::filesystem::equivalent(folder.empty() ? "." : folder, cfg.weights_file, ec))
    throw InputError("--out " + out + " is a file of the model's folder: refusing to overwrite it");
}

}  // namespace

Action add_forward(CLI::App& app, Common& common) {
  struct Flags {
    ModelFlags model;
    std::string ids, out;
  };
  auto f = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("forward", "one forward pass over token ids; writes logits of every position (.npy)");
  add_model_flags(cmd, f->model);
  cmd->add_option("--ids", f->ids, "token ids, comma-separated, e.g. 464,2068,318")->required();
  cmd->add_option("--out", f->out,
                  "output .npy file: float32 [T, vocab_size]; replaced only once complete (a failed write "
                  "leaves any previous file as it was); - is refused, as .npy readers need to seek")
      ->required();
  return [&common, f] {
    if (f->out == "-") throw UsageError("--out -: forward writes a .npy file, which needs a file path, not stdout");
    if (f->out.empty()) throw UsageError("--out: an empty path");
    auto ids = parse_id_list(f->ids);
    if (ids.empty()) throw InputError("--ids: no token ids");  // a [0, vocab] array is no forward pass
    // An output that cannot be written fails now, not after loading and running the model.
    files::check_output(f->out, "cannot write " + f->out + ": ");
    auto s = open_model(common, f->model);
    refuse_overwriting_inputs(f->out, s.cfg, f->model);
    auto logits = s.model->prefill(ids, 0, true);
    write_npy(f->out, {ids.size(), s.cfg.vocab_size}, logits.data());
    return 0;
  };
}

}  // namespace gptvk::cli
