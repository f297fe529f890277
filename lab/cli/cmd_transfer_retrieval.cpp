// agentkv transfer-retrieval: verses in the context, a verse's reference asked after it; accuracy
// of the receiver reproducing the verse's opening words after native prefill, a transferred cache,
// no context, and hybrids (lab/transfer/transfer_retrieval.h).
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "cli/transfer_cli.h"
#include "lab/transfer/transfer_retrieval.h"

namespace agentkv {

namespace {

struct Verse {
  std::string ref, text;
};

// Chapters separated by blank lines, one "REF text" verse per line
// (scripts/make_transfer_corpus.sh --verses).
std::vector<std::vector<Verse>> read_chapters(const std::string& corpus) {
  std::vector<std::vector<Verse>> out(1);
  std::istringstream in(corpus);
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (line.empty() || sp == std::string::npos) {
      if (!out.back().empty()) out.emplace_back();
      continue;
    }
    out.back().push_back({line.substr(0, sp), line.substr(sp + 1)});
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// The first n words of s, and the rest after them (with its leading space).
std::pair<std::string, std::string> split_words(const std::string& s, int n) {
  size_t at = 0;
  for (int i = 0; i < n && at != std::string::npos; ++i) at = s.find(' ', at + 1);
  return at == std::string::npos ? std::make_pair(s, std::string()) : std::make_pair(s.substr(0, at), s.substr(at));
}

}  // namespace

int cmd_transfer_retrieval(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus, hybrid_arg = "8,32,64,128";
  int64_t threads = 0, ctx_bytes = 1500, n_probes = 4, words = 4, max_passages = 20;
  ArgParser p("transfer-retrieval",
              "Verse retrieval after native prefill, a transferred cache, no context and hybrids: accuracy per mode.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--corpus", &corpus, "held-out verses: one \"REF text\" per line, chapters separated by blank lines", true);
  p.add_string("--hybrid", &hybrid_arg, "hybrid modes: the receiver recomputes the context's last K tokens, comma-separated");
  p.add_int("--context-bytes", &ctx_bytes, "context length in bytes (whole verses)", 64, 1 << 20);
  p.add_int("--probes", &n_probes, "verses asked per context", 1, 64);
  p.add_int("--words", &words, "words after the verse's first that must match exactly", 1, 64);
  p.add_int("--max-passages", &max_passages, "chapters (contexts) to use", 1, 1 << 20);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  auto hybrid_list = parse_int_list("--hybrid", hybrid_arg, 1, 1 << 20);
  if (!hybrid_list.ok()) return cli_fail(hybrid_list.error());
  const std::vector<int> hybrid(hybrid_list->begin(), hybrid_list->end());
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const auto chapters = read_chapters(setup->corpus);
  ThreadPool pool{int(threads)};

  RetrievalHits total;
  total.hybrid.assign(hybrid.size(), 0);
  int64_t ctx_tokens = 0;
  int used = 0;
  std::printf("%-10s %5s %6s %7s %9s %7s", "passage", "ctx", "probes", "native", "transfer", "no-ctx");
  for (int k : hybrid) std::printf("  last%-3d", k);
  std::printf("\n");
  for (const auto& ch : chapters) {
    if (used >= max_passages) break;
    std::string context;
    size_t n_verses = 0;
    while (n_verses < ch.size()) {
      const std::string line = ch[n_verses].ref + " " + ch[n_verses].text;
      if (!context.empty() && context.size() + 1 + line.size() > size_t(ctx_bytes)) break;
      if (!context.empty()) context.push_back('\n');
      context.append(line);
      ++n_verses;
    }
    if (n_verses < size_t(n_probes) + 1) continue;  // too few verses to ask about
    // Probes spread over the context, never its last verse (whose text the context just ended with).
    std::vector<RetrievalProbe> probes;
    for (int64_t j = 0; j < n_probes; ++j) {
      const Verse& v = ch[size_t(j) * (n_verses - 1) / size_t(n_probes)];
      // The probe is the reference and the verse's first word: a reference alone ends in a digit,
      // after which the model may well go on with the number (verse 1 → 10). The rest of the
      // verse is what must come back.
      const auto [first, rest] = split_words(v.text, 1);
      RetrievalProbe probe;
      // GCC 12 warns (-Wrestrict, a false positive) on "literal" + std::string here; append instead.
      probe.prompt.append("\n").append(v.ref).append(" ").append(first);
      probe.expected = split_words(rest, int(words)).first;
      probes.push_back(std::move(probe));
    }
    auto h = measure_retrieval(setup->map, *setup->sender, *setup->receiver, context, probes, hybrid, pool);
    if (!h.ok()) return cli_fail(h.error());
    std::printf("%-10s %5lld %6d %7d %9d %7d", ch[0].ref.c_str(), (long long)h->n_context_tokens, h->n_probes, h->native,
                h->transferred, h->no_context);
    for (size_t i = 0; i < hybrid.size(); ++i) std::printf(" %7d", h->hybrid[i]);
    std::printf("\n");
    std::fflush(stdout);
    total.n_probes += h->n_probes;
    total.native += h->native;
    total.transferred += h->transferred;
    total.no_context += h->no_context;
    for (size_t i = 0; i < hybrid.size(); ++i) total.hybrid[i] += h->hybrid[i];
    ctx_tokens += h->n_context_tokens;
    ++used;
  }
  if (used == 0) return cli_fail("no chapter in '" + corpus + "' has enough verses for " + std::to_string(n_probes) + " probes");
  const double n = double(total.n_probes);
  std::printf("accuracy over %d probes (%d contexts, mean %.0f receiver tokens): native %.3f, transferred %.3f, "
              "no context %.3f",
              total.n_probes, used, double(ctx_tokens) / used, total.native / n, total.transferred / n, total.no_context / n);
  for (size_t i = 0; i < hybrid.size(); ++i) std::printf(", hybrid last %d %.3f", hybrid[i], total.hybrid[i] / n);
  std::printf("\n");
  return 0;
}

}  // namespace agentkv
