#include "models/model_path.hpp"

#include <filesystem>

#include "engine/error.hpp"
#include "engine/files.hpp"
#include "models/gguf_file.hpp"
#include "models/gguf_source.hpp"
#include "models/hf_snapshot.hpp"
#include "models/weights_source.hpp"

namespace gptvk {

namespace fs = std::filesystem;

DType default_dtype_for_path(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || sniff_format(path) != FileFormat::Gguf) return DType::F16;
  return gguf_native_dtype(GgufFile::open(path));
}

ModelConfig model_config_for_path(const std::string& path, DType dtype) {
  std::error_code ec;
  // A link loop or a name too long is said as such, not as "not found".
  if (!files::exists(path, path + ": ")) throw InputError("model " + path + " not found");
  if (fs::is_directory(path, ec)) {
    // A config that is a dangling or looping link is opened, to say so.
    const fs::path json = fs::path(path) / "config.json", toml = fs::path(path) / "config.toml";
    if (files::present(json.string(), json.string() + ": ")) return snapshot_model_config(path, dtype);
    if (files::present(toml.string(), toml.string() + ": ")) return load_config(toml.string());
    throw InputError(path + ": a folder without config.json (a Hugging Face snapshot) or config.toml");
  }
  if (!fs::is_regular_file(path, ec)) throw InputError(path + ": not a regular file");
  switch (sniff_format(path)) {
    case FileFormat::Gguf:
      return gguf_model_config(GgufFile::open(path), dtype);
    case FileFormat::Safetensors:
      if (fs::file_size(path, ec) < 9) break;  // too short to be one: said below as what it is
      [[fallthrough]];
    case FileFormat::TorchZip:
    case FileFormat::TorchLegacy:
      throw InputError(path + ": " +
                       (sniff_format(path) == FileFormat::Safetensors ? "a safetensors file" : "a torch.save file") +
                       " holds no hyperparameters: give its folder with config.json, or --config with a TOML "
                       "whose [weights] file names it");
    case FileFormat::Unknown:
      break;
  }
  if (fs::path(path).extension() == ".toml") return load_config(path);
  throw InputError(path + ": not GGUF, a Hugging Face snapshot folder or a TOML config: " + describe_file_start(path));
}

}  // namespace gptvk
