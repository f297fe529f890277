#include "lab/prm/step_proposals.h"

#include <algorithm>

#include "engine/engine.h"
#include "engine/request_outcome.h"
#include "lab/prm/trajectory.h"

namespace agentkv::prm {

Result<std::unique_ptr<StepProposer>> StepProposer::create(const LoadedModel& lm, const ProposeOptions& opt,
                                                           ThreadPool& pool) {
  EngineOptions eo;
  eo.kv.mem_bytes = opt.kv_mem_bytes;
  eo.max_n = std::max(64, opt.n);
  auto engine = Engine::create(lm, eo, pool);
  if (!engine.ok()) return make_error(engine.error());
  return std::unique_ptr<StepProposer>(new StepProposer(lm, opt, std::move(*engine)));
}

Result<std::unique_ptr<StepProposer>> create_answerer(const LoadedModel& lm, const ProposeOptions& sampling,
                                                      ThreadPool& pool) {
  ProposeOptions ao = sampling;
  ao.n = 1;
  ao.temperature = 0;
  return StepProposer::create(lm, ao, pool);
}

Result<std::vector<std::vector<StepProposal>>> propose_steps(const LoadedModel& lm,
                                                             std::span<const std::vector<int32_t>> contexts,
                                                             const ProposeOptions& opt, ThreadPool& pool) {
  auto proposer = StepProposer::create(lm, opt, pool);
  if (!proposer.ok()) return make_error(proposer.error());
  return (*proposer)->propose(contexts);
}

Result<std::vector<std::vector<StepProposal>>> StepProposer::sample(std::span<const std::vector<int32_t>> contexts,
                                                                    int max_tokens, bool one_line) {
  Engine* engine = engine_.get();
  const uint64_t call = calls_++;
  std::vector<std::vector<StepProposal>> out(contexts.size(), std::vector<StepProposal>(size_t(opt_.n)));
  for (size_t c = 0; c < contexts.size(); ++c) {
    RequestParams rp;
    rp.prompt = contexts[c];
    rp.n = opt_.n;
    rp.max_tokens = max_tokens;
    rp.top_logprobs = 0;
    if (one_line) rp.stop = {"\n"};
    rp.sampling.temperature = opt_.temperature;
    rp.sampling.seed = (opt_.seed * 1000003u + call) * 1000003u + c;
    std::vector<StepProposal>* props = &out[c];
    auto id = engine->add_request(rp, [props](const RequestEvent& ev) {
      if (!ev.has_token || size_t(ev.seq_index) >= props->size()) return;
      StepProposal& p = (*props)[size_t(ev.seq_index)];
      if (!answer_token(ev)) {
        p.ended = true;
        return;
      }
      p.tokens.push_back(ev.token);
      p.logprob += ev.logprob.logprob;
    });
    if (!id.ok()) return make_error(id.error());
  }
  if (Status st = engine->run_until_idle(); !st.ok()) return make_error(st.error());
  for (const auto& props : out)
    for (const StepProposal& p : props) tokens_sampled_ += int64_t(p.tokens.size());
  return out;
}

Result<std::vector<std::vector<StepProposal>>> StepProposer::propose(std::span<const std::vector<int32_t>> contexts) {
  const Tokenizer& tok = *lm_.tokenizer;
  auto out = sample(contexts, opt_.max_tokens, true);
  if (!out.ok()) return out;
  for (auto& props : *out)
    for (StepProposal& p : props) {
      // A token may carry text past the newline; the line ends with that token, as in split_lines.
      auto lines = split_lines(tok, p.tokens);
      p.tokens = lines.empty() ? std::vector<int32_t>{} : lines.front();
      // A line cut by the end token or the length limit still gets its newline: the verify tokens
      // and the next step always follow one.
      if (p.tokens.empty() || tok.token_to_piece(p.tokens.back(), false).find('\n') == std::string::npos)
        for (int32_t t : tok.encode("\n", false, false)) p.tokens.push_back(t);
      std::string text = tok.decode(p.tokens);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
      const size_t nl = text.find('\n');
      p.text = nl == std::string::npos ? text : text.substr(0, nl);
    }
  return out;
}

Result<std::vector<StepProposal>> StepProposer::answer_lines(std::span<const std::vector<int32_t>> contexts) {
  const std::vector<int32_t> prefix = lm_.tokenizer->encode(kAnswerPrefix, false, false);
  std::vector<std::vector<int32_t>> with_prefix(contexts.begin(), contexts.end());
  for (std::vector<int32_t>& c : with_prefix) c.insert(c.end(), prefix.begin(), prefix.end());
  auto props = propose(with_prefix);
  if (!props.ok()) return make_error(props.error());
  std::vector<StepProposal> out;
  out.reserve(props->size());
  for (std::vector<StepProposal>& ps : *props) {
    StepProposal line = std::move(ps.front());
    line.tokens.insert(line.tokens.begin(), prefix.begin(), prefix.end());
    line.text = std::string(kAnswerPrefix) + line.text;
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace agentkv::prm
