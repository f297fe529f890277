#include "lab/prm/trajectory.h"

#include <algorithm>

#include "kv/direct_prefill.h"

namespace agentkv::prm {

std::vector<std::vector<int32_t>> split_lines(const Tokenizer& tok, std::span<const int32_t> generated) {
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> run;
  for (int32_t t : generated) {
    run.push_back(t);
    if (tok.token_to_piece(t, false).find('\n') != std::string::npos) out.push_back(std::move(run)), run.clear();
  }
  if (!run.empty()) out.push_back(std::move(run));
  return out;
}

std::vector<std::vector<int32_t>> encode_lines(const Tokenizer& tok, std::string_view text) {
  std::vector<std::vector<int32_t>> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    out.push_back(tok.encode(std::string(line) + "\n", false, false));
  }
  return out;
}

std::vector<int32_t> concat_prefix(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> lines,
                                   size_t n) {
  std::vector<int32_t> out(prompt.begin(), prompt.end());
  for (size_t i = 0; i < n && i < lines.size(); ++i) out.insert(out.end(), lines[i].begin(), lines[i].end());
  return out;
}

Result<std::vector<std::vector<KvSequence>>> line_contexts(
    const Model& model, KvManager& kv, std::span<const KvSequence* const> starts,
    std::span<const std::span<const std::vector<int32_t>>> trajectories, ThreadPool& pool) {
  AGENTKV_CHECK(starts.size() == trajectories.size());
  std::vector<KvSequence> heads;
  std::vector<KvSequence*> head_ptrs;
  size_t max_lines = 0;
  heads.reserve(trajectories.size());
  for (size_t t = 0; t < trajectories.size(); ++t) {
    heads.push_back(starts[t]->fork());
    head_ptrs.push_back(&heads.back());
    max_lines = std::max(max_lines, trajectories[t].size());
  }
  std::vector<std::vector<KvSequence>> out(trajectories.size());
  std::vector<std::span<const int32_t>> parts(trajectories.size());
  for (size_t k = 0; k < max_lines; ++k) {
    for (size_t t = 0; t < trajectories.size(); ++t) {
      parts[t] = k < trajectories[t].size() ? std::span<const int32_t>(trajectories[t][k]) : std::span<const int32_t>();
      if (k < trajectories[t].size() && parts[t].empty()) return make_error("line_contexts: an empty line");
    }
    if (Status st = prefill_together(model, kv, head_ptrs, parts, pool); !st.ok()) return make_error(st.error());
    for (size_t t = 0; t < trajectories.size(); ++t)
      if (k < trajectories[t].size()) out[t].push_back(heads[t].fork());
  }
  return out;
}

}  // namespace agentkv::prm
