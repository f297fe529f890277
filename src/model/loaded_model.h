// A model ready to run: the mapped GGUF, its tokenizer and its weights, plus the fingerprint that
// keys every KV cache entry made with it.
#pragma once

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace agentkv {

struct LoadedModel {
  std::string name;   // alias or path as given
  std::string path;   // resolved file path
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
  uint64_t fingerprint = 0;  // hash of file size, metadata and tensor table (not all weight bytes)

  const ModelConfig& config() const { return model->config(); }
};

// The model cache directory: $AGENTKV_MODELS or ~/.cache/agentkv/models.
std::string model_cache_dir();

// "smollm2" / "gemma3" → the cached file; anything else must be an existing .gguf path.
Result<std::string> resolve_model_path(const std::string& name_or_path);

Result<std::unique_ptr<LoadedModel>> load_model(const std::string& name_or_path);

}  // namespace agentkv
