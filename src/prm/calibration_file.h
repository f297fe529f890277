// The fitted verify head on disk: a JSON file that names the model it was fitted on (by fingerprint,
// so a head is never applied to another model's hidden states), the verify question and answer
// tokens, the calibration, the trained probe and the figures of the fit. A checksum covers every
// field (version 3; version 2's covered only the probe), so an edited or truncated file is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "prm/verify_head.h"
#include "util/status.h"

namespace agentkv::prm {

struct CalibrationRecord {
  uint64_t model_fingerprint = 0;
  std::string model_name;
  std::string question;
  std::string pos_text = "+", neg_text = "-";
  int32_t pos_token = -1, neg_token = -1;
  Calibration calibration;
  int64_t n_train_steps = 0;
  int64_t n_train_positive = 0;
  double train_auroc = 0;
  double train_log_loss = 0;
  std::optional<StepProbe> probe;
  double heldout_auroc = 0;  // of the probe on held-out steps; 0 when not measured
};

// A calibration is a few hundred KB (a probe over n_embd features); anything far larger is not one.
inline constexpr int64_t kMaxCalibrationBytes = int64_t(64) << 20;

Status write_calibration(const std::string& path, const CalibrationRecord& r);
Result<CalibrationRecord> read_calibration(const std::string& path);

// Checks the record against the model about to use it (fingerprint and answer tokens) and returns
// the head it describes. The error names the mismatch.
// n_embd and n_layer are the model's, to check a probe's shape against.
Result<VerifyHead> head_from_record(const CalibrationRecord& r, const Tokenizer& tok, uint64_t model_fingerprint,
                                    int n_embd, int n_layer);

}  // namespace agentkv::prm
