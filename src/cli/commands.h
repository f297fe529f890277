// The product's agentkv subcommands (the lab's: lab/cli/lab_commands.h). Each takes argv with argv[0] = the subcommand name and returns the exit code.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/loaded_model.h"

namespace agentkv {

int cmd_generate(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_kv_save(int argc, char** argv);
int cmd_transfer_generate(int argc, char** argv);

// "a,b,,c" -> {"a", "b", "c"}: list-valued options (--mode, serve's -m).
std::vector<std::string> split_commas(const std::string& s);

// Text inputs (corpora, contexts, perplexity text, tokenize's JSONL) are read whole; 1 GiB is far
// above any of them and bounds what a wrong path (/dev/zero is refused anyway) can cost.
inline constexpr int64_t kMaxTextInputBytes = int64_t(1) << 30;

// The whole file through read_input_file: only a regular file of at most kMaxTextInputBytes.
// `what` names the input in the error ("--corpus", "-f").
Result<std::string> read_text_file(const std::string& path, std::string_view what);

// A sender and a receiver model (fit-transfer, transfer-quality).
Result<std::pair<std::unique_ptr<LoadedModel>, std::unique_ptr<LoadedModel>>> load_model_pair(const std::string& sender,
                                                                                               const std::string& receiver);

// The verify head for `lm`: fit-prm's calibration file when `calibration` is set, fit-prm --lora's
// adapter file when `adapter` is (each checked against the model; not both), else the untrained head.
namespace prm {
struct VerifyHead;
}
Result<prm::VerifyHead> load_verify_head(const LoadedModel& lm, const std::string& calibration,
                                         const std::string& adapter = "");

// Prints "agentkv: error: <msg>" as one line on stderr and returns 1.
int cli_fail(const std::string& msg);

}  // namespace agentkv
