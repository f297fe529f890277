// Factories of the supported architectures, one source file each.
#pragma once

#include <memory>

#include "model/model.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_llama_model(const GgufFile& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> create_gemma3_model(const GgufFile& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> create_qwen2_model(const GgufFile& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> create_qwen3_model(const GgufFile& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> create_phi3_model(const GgufFile& file, ModelConfig cfg);
Result<std::unique_ptr<Model>> create_gemma2_model(const GgufFile& file, ModelConfig cfg);

}  // namespace agentkv
