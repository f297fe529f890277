// Architecture "gemma3": the Gemma decoder with a per-head Q/K norm before RoPE and five local layers
// of every six. llama.cpp's gemma3 loader hard-codes that pattern of 6 and a local RoPE base of 10000
// when the file does not say otherwise.
#include "model/architectures.h"
#include "model/gemma_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_gemma3_model(const GgufFile& f, ModelConfig cfg) {
  return load_gemma_decoder(f, std::move(cfg), GemmaParts{.qk_norm = true, .swa_pattern = 6});
}

}  // namespace agentkv
