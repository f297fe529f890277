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
  // Hash of file size, metadata and tensor table (not all weight bytes), and LongRoPE's factor
  // choice: KV computed under one set is never reused under the other.
  uint64_t fingerprint = 0;

  const ModelConfig& config() const { return model->config(); }
};

// The model cache directory: $AGENTKV_MODELS or ~/.cache/agentkv/models.
std::string model_cache_dir();

// "smollm2" / "gemma3" → the cached file; anything else must be an existing .gguf path.
Result<std::string> resolve_model_path(const std::string& name_or_path);

// opt.n_ctx: the context per sequence the model will run under (model_config.h's ModelOptions).
Result<std::unique_ptr<LoadedModel>> load_model(const std::string& name_or_path, const ModelOptions& opt = {});

// Rebuilds lm.model for a context per sequence of n_ctx when that context picks other LongRoPE
// factors than the model has (the weights stay where they are in the mapping); other files, and a
// LongRoPE file whose choice does not change, are left as they are.
Status fit_model_to_context(LoadedModel& lm, int n_ctx);

}  // namespace agentkv
