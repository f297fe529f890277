// The policy-sampling options that fit-prm and search share, declared once.
#pragma once

#include "cli/arg_parser.h"
#include "lab/prm/step_dataset.h"
#include "lab/prm/step_proposals.h"

namespace agentkv {

struct PolicySamplingArgs {
  int64_t n = 4, max_tokens = 96, line_tokens = 32, seed = 1;
  double temperature = 0.8;

  void declare(ArgParser& p) {
    p.add_int("-n,--samples", &n, "sampled solutions per problem", 1, 64);
    p.add_float("--temperature", &temperature, "sampling temperature of the policy", 0.0, 2.0);
    p.add_int("--max-tokens", &max_tokens, "longest solution in tokens", 8, 4096);
    p.add_int("--line-tokens", &line_tokens, "longest proposed step line in tokens (step-wise sampling)", 4, 256);
    p.add_int("--seed", &seed, "sampling seed", 0, int64_t(1) << 62);
  }
  prm::SampleOptions options() const {
    prm::SampleOptions o;
    o.n_samples = int(n);
    o.temperature = float(temperature);
    o.max_tokens = int(max_tokens);
    o.seed = uint64_t(seed);
    return o;
  }
  prm::ProposeOptions propose_options() const {
    prm::ProposeOptions o;
    o.n = int(n);
    o.temperature = float(temperature);
    o.max_tokens = int(line_tokens);
    o.seed = uint64_t(seed);
    return o;
  }
};

}  // namespace agentkv
