#include "model/loaded_model.h"

#include <sys/stat.h>

#include <cstdlib>

#include "tokenizer/vocab_loader.h"
#include "util/fnv_hash.h"

namespace agentkv {

namespace {

struct Alias {
  const char* name;
  const char* file;
};
constexpr Alias kAliases[] = {
    {"smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"},
    {"gemma3", "gemma-3-270m-q4_k_m.gguf"},
};

bool is_regular_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// FNV-1a over what identifies a model's numerics: sizes, metadata keys/values and the tensor table.
uint64_t fingerprint_of(const GgufFile& f, const ModelConfig& cfg) {
  Fnv1a fnv;
  auto mix = [&](const void* p, size_t n) { fnv.mix(p, n); };
  const uint64_t size = f.file_size();
  mix(&size, sizeof size);
  for (const std::string& k : f.keys()) {
    mix(k.data(), k.size());
    const std::string v = f.value_to_string(k, 16);
    mix(v.data(), v.size());
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    mix(t.name.data(), t.name.size());
    mix(&t.type, sizeof t.type);
    mix(&t.offset, sizeof t.offset);
    // A sample of the weight bytes, so two files with equal headers but different weights differ.
    mix(t.data, std::min<uint64_t>(t.nbytes, 64));
  }
  if (cfg.longrope) {
    const uint8_t long_factors = rope_uses_long_factors(cfg, cfg.n_ctx_seq) ? 1 : 0;
    mix(&long_factors, 1);
  }
  return fnv.value();
}

}  // namespace

std::string model_cache_dir() {
  if (const char* env = std::getenv("AGENTKV_MODELS"); env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/agentkv/models";
}

Result<std::string> resolve_model_path(const std::string& name) {
  for (const Alias& a : kAliases) {
    if (name == a.name) {
      std::string p = model_cache_dir() + "/" + a.file;
      if (!is_regular_file(p))
        return make_error("model '" + name + "' is not in the cache (" + p +
                          "); fetch it with: python3 scripts/fetch_models.py " + name);
      return p;
    }
  }
  if (!is_regular_file(name))
    return make_error("model '" + name + "' is neither a known alias (smollm2, gemma3) nor a readable file");
  return name;
}

Result<std::unique_ptr<LoadedModel>> load_model(const std::string& name, const ModelOptions& opt) {
  auto lm = std::make_unique<LoadedModel>();
  lm->name = name;
  AGENTKV_ASSIGN_OR_RETURN(lm->path, resolve_model_path(name));
  AGENTKV_ASSIGN_OR_RETURN(lm->file, GgufFile::open(lm->path));
  VocabData vocab;
  AGENTKV_ASSIGN_OR_RETURN(vocab, load_vocab(*lm->file));
  AGENTKV_ASSIGN_OR_RETURN(lm->tokenizer, Tokenizer::create(std::move(vocab)));
  AGENTKV_ASSIGN_OR_RETURN(lm->model, create_model(*lm->file, opt));
  if (lm->tokenizer->n_vocab() > lm->model->config().n_vocab)
    return make_error("tokenizer has " + std::to_string(lm->tokenizer->n_vocab()) + " tokens but the embedding only " +
                      std::to_string(lm->model->config().n_vocab));
  lm->fingerprint = fingerprint_of(*lm->file, lm->model->config());
  return lm;
}

Status fit_model_to_context(LoadedModel& lm, int n_ctx) {
  const ModelConfig& c = lm.config();
  if (!c.longrope || rope_uses_long_factors(c, n_ctx) == rope_uses_long_factors(c, c.n_ctx_seq)) return {};
  AGENTKV_ASSIGN_OR_RETURN(lm.model, create_model(*lm.file, ModelOptions{.n_ctx = n_ctx}));
  lm.fingerprint = fingerprint_of(*lm.file, lm.model->config());
  return {};
}

}  // namespace agentkv
