// agentkv fit-transfer: fits a sender → receiver KV projection map on a calibration corpus and
// writes it as a GGUF map file (src/transfer/transfer_map.h).
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/transfer/transfer_fit.h"
#include "util/progress_bar.h"

namespace agentkv {

namespace {

// Passages are separated by blank lines (scripts/make_transfer_corpus.sh writes one chapter per
// passage); each is cut at a space to at most max_bytes so both models see bounded sequences.
std::vector<std::string> split_passages(const std::string& text, size_t max_bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    std::string p = text.substr(at, end - at);
    while (!p.empty() && (p.back() == '\n' || p.back() == ' ')) p.pop_back();
    while (!p.empty() && (p.front() == '\n' || p.front() == ' ')) p.erase(0, 1);
    if (p.size() > max_bytes) {
      const size_t sp = p.rfind(' ', max_bytes);
      p.resize(sp == std::string::npos || sp == 0 ? max_bytes : sp);
    }
    if (!p.empty()) out.push_back(std::move(p));
    at = end + 2;
  }
  return out;
}

}  // namespace

int cmd_fit_transfer(int argc, char** argv) {
  std::string from, to, corpus, out;
  int64_t threads = 0, max_bytes = 3000, max_passages = 0;
  double alpha = 1e-4;
  std::string pooling = "overlap", alpha_grid;
  int64_t holdout_every = 5, receiver_layers = 0, sender_window = 1;
  ArgParser p("fit-transfer", "Fit a KV transfer map from one model's cache to another's (ridge per layer and KV head); the map "
                              "also keeps how often each receiver token occurs in the corpus, for the hybrid by rarity.");
  p.add_string("--from", &from, "sender model alias or .gguf path", true);
  p.add_string("--to", &to, "receiver model alias or .gguf path", true);
  p.add_string("--corpus", &corpus, "calibration text, passages separated by blank lines", true);
  p.add_string("--out", &out, "map file to write (.gguf)", true);
  p.add_float("--alpha", &alpha, "ridge strength, relative to the mean feature energy", 0.0, 1e6);
  p.add_string("--alpha-grid", &alpha_grid,
               "choose each layer's ridge strength from these (comma-separated) by held-out K/V error, every "
               "--holdout-every-th passage held out, then refit on all passages (replaces --alpha)");
  p.add_int("--holdout-every", &holdout_every, "with --alpha-grid: hold out every N-th passage", 2, 1 << 20);
  p.add_int("--receiver-layers", &receiver_layers,
            "condition the map on the receiver's own hidden state after its first N layers (which it then computes "
            "natively for every token when applying the map); 0: the sender's K/V alone",
            0, 1024);
  p.add_int("--sender-window", &sender_window,
            "each receiver layer reads N consecutive sender layers around its depth-proportional one (their K/V side "
            "by side: N times the features, N times the projection's work when applying the map)",
            1, 1024);
  p.add_string("--pooling", &pooling, "how a receiver token combines the sender tokens covering it: mean, overlap (by shared bytes), last");
  p.add_int("--max-bytes", &max_bytes, "longest passage in bytes (longer ones are cut at a space)", 16, 1 << 20);
  p.add_int("--max-passages", &max_passages, "use at most this many passages (0 = all)", 0, 1 << 30);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  const auto pooling_rule = parse_span_pooling(pooling);
  if (!pooling_rule) return cli_fail("--pooling must be mean, overlap or last, not '" + pooling + "'");
  auto read = read_text_file(corpus, "--corpus");
  if (!read.ok()) return cli_fail(read.error());
  const std::string text = std::move(*read);
  std::vector<std::string> passages = split_passages(text, size_t(max_bytes));
  if (max_passages > 0 && int64_t(passages.size()) > max_passages) passages.resize(size_t(max_passages));
  if (passages.empty()) return cli_fail("corpus '" + corpus + "' has no text");
  auto models = load_model_pair(from, to);
  if (!models.ok()) return cli_fail(models.error());
  const LoadedModel& sender = *models->first;
  const LoadedModel& receiver = *models->second;
  if (receiver_layers >= receiver.config().n_layer)
    return cli_fail("--receiver-layers " + std::to_string(receiver_layers) + ": " + to + " has " +
                    std::to_string(receiver.config().n_layer) + " layers");
  if (sender_window > sender.config().n_layer)
    return cli_fail("--sender-window " + std::to_string(sender_window) + ": " + from + " has " +
                    std::to_string(sender.config().n_layer) + " layers");
  ThreadPool pool{int(threads)};
  TransferFitOptions opt;
  opt.sender_window = int(sender_window);
  opt.ridge_alpha = alpha;
  opt.pooling = *pooling_rule;
  opt.holdout_every = int(holdout_every);
  opt.receiver_hidden_layers = int(receiver_layers);
  if (!alpha_grid.empty()) {
    std::istringstream in(alpha_grid);
    std::string item;
    while (std::getline(in, item, ',')) {
      char* end = nullptr;
      const double a = std::strtod(item.c_str(), &end);
      if (item.empty() || *end || !(a >= 0.0 && a <= 1e6))
        return cli_fail("--alpha-grid: '" + item + "' is not a ridge strength in [0, 1e6]");
      opt.alpha_grid.push_back(a);
    }
  }
  TransferFitter fitter(sender, receiver, opt);
  const auto t0 = std::chrono::steady_clock::now();
  ProgressBar bar("fit-transfer " + from + " -> " + to, int64_t(passages.size()));
  for (size_t i = 0; i < passages.size(); ++i) {
    const Status st = fitter.add_passage(passages[i], pool);
    if (!st.ok()) return cli_fail("passage " + std::to_string(i) + ": " + st.error());
    bar.update(int64_t(i + 1), std::to_string(fitter.n_rows()) + " rows");
  }
  bar.finish(std::to_string(fitter.n_rows()) + " rows");
  AlphaChoice choice;
  auto map = fitter.solve(&choice);
  if (!map.ok()) return cli_fail(map.error());
  if (!opt.alpha_grid.empty()) {
    // The choice per receiver layer: held-out relative K/V error at each grid alpha.
    std::printf("held-out relative K/V squared error (%lld rows), per receiver layer:\n%-6s", (long long)choice.n_heldout_rows,
                "layer");
    for (double a : opt.alpha_grid) std::printf(" %10g", a);
    std::printf("  chosen\n");
    for (size_t l = 0; l < choice.alpha.size(); ++l) {
      std::printf("%-6zu", l);
      for (double e : choice.heldout_error[l]) std::printf(" %10.5f", e);
      std::printf("  %g\n", choice.alpha[l]);
    }
  }
  const Status st = save_transfer_map(*map, out);
  if (!st.ok()) return cli_fail(st.error());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ifstream written(out, std::ios::binary | std::ios::ate);
  std::fprintf(stdout, "%s: %zu passages, %lld receiver tokens, %d layers, %.1f s, %.2f MB\n", out.c_str(),
               passages.size(), (long long)map->n_fit_tokens, map->receiver_n_layer, secs,
               double(written.tellg()) / 1e6);
  return 0;
}

}  // namespace agentkv
