// Reads the tokenizer.ggml.* metadata of a GGUF file into a VocabData, applying llama.cpp's
// defaults for absent keys (per tokenizer model).
#pragma once

#include "tokenizer/vocab.h"
#include "util/status.h"

namespace agentkv {

class GgufFile;

Result<VocabData> load_vocab(const GgufFile& file);

}  // namespace agentkv
