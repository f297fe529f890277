// The verifier's LoRA adapters on disk: a sealed GGUF (general.architecture "agentkv-lora") holding
// A and B of every projection of every block, the rank and scale, the fingerprint and geometry of the
// model they were fitted on and the verify question and answers they were fitted with. A checksum
// covers every byte, so an edited or truncated file is refused, and so is a file of another model.
#pragma once

#include <cstdint>
#include <string>

#include "model/lora_adapters.h"
#include "prm/verify_head.h"
#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv::prm {

struct AdapterRecord {
  uint64_t model_fingerprint = 0;
  std::string model_name;
  std::string question, pos_text = "+", neg_text = "-";
  int64_t n_train_examples = 0;
  double heldout_auroc = 0;  // 0: not measured
};

Status write_adapter_file(const std::string& path, const LoraAdapters& adapters, const AdapterRecord& r);

struct AdapterFile {
  LoraAdapters adapters;
  AdapterRecord record;
};

// Reads the file for the model about to use it: refused (the error names the mismatch) when the
// fingerprint or the geometry is another model's, when the checksum fails, or when a value is not finite.
Result<AdapterFile> read_adapter_file(const std::string& path, const ModelConfig& cfg, uint64_t model_fingerprint);

// The verify head the adapters were fitted with (their question and answer tokens), with the adapters
// on: the score is the adapted log-odds of the answers, uncalibrated, as fit-prm --lora trained it.
Result<VerifyHead> head_from_adapter_file(AdapterFile file, const Tokenizer& tok);

}  // namespace agentkv::prm
