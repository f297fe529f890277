#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "prm/adapter_file.h"
#include "prm/calibration_file.h"
#include "util/input_file.h"

namespace agentkv {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<std::string> read_text_file(const std::string& path, std::string_view what) {
  return read_input_file(path, kMaxTextInputBytes, what);
}

Result<std::pair<std::unique_ptr<LoadedModel>, std::unique_ptr<LoadedModel>>> load_model_pair(const std::string& sender,
                                                                                               const std::string& receiver) {
  auto a = load_model(sender);
  if (!a.ok()) return a.status_error();
  auto b = load_model(receiver);
  if (!b.ok()) return b.status_error();
  return std::make_pair(std::move(*a), std::move(*b));
}

Result<prm::VerifyHead> load_verify_head(const LoadedModel& lm, const std::string& path, const std::string& adapter) {
  if (!path.empty() && !adapter.empty())
    return make_error("give a calibration file or an adapter file, not both (adapters are scored by their own "
                      "answer log-odds; a calibration was fitted on another head's)");
  if (!adapter.empty()) {
    auto file = prm::read_adapter_file(adapter, lm.config(), lm.fingerprint);
    if (!file.ok()) return file.status_error();
    return prm::head_from_adapter_file(std::move(*file), *lm.tokenizer);
  }
  if (path.empty()) return prm::make_verify_head(*lm.tokenizer);
  auto rec = prm::read_calibration(path);
  if (!rec.ok()) return rec.status_error();
  return prm::head_from_record(*rec, *lm.tokenizer, lm.fingerprint, lm.config().n_embd, lm.config().n_layer);
}

int cli_fail(const std::string& msg) {
  // One line, whatever the message holds.
  std::string line = msg;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "agentkv: error: %s\n", line.c_str());
  return 1;
}

}  // namespace agentkv
