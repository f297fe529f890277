// agentkv transfer-retrieval: recall from the context after native prefill, a transferred cache, no
// context, and hybrids (lab/transfer/transfer_retrieval.h). Two tasks share the run: verses (a
// verse's reference asked after the verses; its next words must come back) and passkey (a random
// 5-digit key planted at a depth in held-out filler text; asked for after it).
#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "cli/transfer_cli.h"
#include "lab/transfer/hybrid_modes.h"
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

// One measured context: its label (a table row), text and probes.
struct Trial {
  std::string label, context;
  std::vector<RetrievalProbe> probes;
};

// Verses: each chapter's first whole verses up to ctx_bytes, n_probes verses asked about.
std::vector<Trial> verse_trials(const std::string& corpus, int64_t ctx_bytes, int64_t n_probes, int64_t words,
                                int64_t max_passages) {
  std::vector<Trial> out;
  for (const auto& ch : read_chapters(corpus)) {
    if (int64_t(out.size()) >= max_passages) break;
    Trial t;
    t.label = ch[0].ref;
    size_t n_verses = 0;
    while (n_verses < ch.size()) {
      const std::string line = ch[n_verses].ref + " " + ch[n_verses].text;
      if (!t.context.empty() && t.context.size() + 1 + line.size() > size_t(ctx_bytes)) break;
      if (!t.context.empty()) t.context.push_back('\n');
      t.context.append(line);
      ++n_verses;
    }
    if (n_verses < size_t(n_probes) + 1) continue;  // too few verses to ask about
    // Probes spread over the context, never its last verse (whose text the context just ended with).
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
      t.probes.push_back(std::move(probe));
    }
    out.push_back(std::move(t));
  }
  return out;
}

// Passages of filler text: blank-line separated, their lines joined with spaces (a verse file's
// references are kept as text; the plain corpus has one passage per line).
std::vector<std::string> read_passages(const std::string& corpus) {
  std::vector<std::string> out(1);
  std::istringstream in(corpus);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) {
      if (!out.back().empty()) out.emplace_back();
      continue;
    }
    if (!out.back().empty()) out.back().push_back(' ');
    out.back().append(line);
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// Passkey: per passage, its first ctx_bytes (whole words) with a needle planted at each depth (a
// context per depth, each with its own key), the needle placed after the sentence ending nearest
// before the depth (or the word boundary when no sentence ends before it). Keys come from a
// mt19937_64 seeded with `seed` (its output sequence is fixed by the standard), so a run repeats.
std::vector<Trial> passkey_trials(const std::string& corpus, int64_t ctx_bytes, const std::vector<int64_t>& depths,
                                  uint64_t seed, int64_t max_passages) {
  std::mt19937_64 rng(seed);
  std::vector<Trial> out;
  const auto passages = read_passages(corpus);
  for (size_t pi = 0; pi < passages.size() && int64_t(pi) < max_passages; ++pi) {
    std::string filler = passages[pi];
    if (filler.size() > size_t(ctx_bytes)) {
      const size_t cut = filler.rfind(' ', size_t(ctx_bytes));
      filler.resize(cut == std::string::npos ? size_t(ctx_bytes) : cut);
    }
    for (int64_t d : depths) {
      const std::string key = std::to_string(10000 + rng() % 90000);
      size_t at = filler.size() * size_t(d) / 100;
      const size_t sentence = at == 0 ? std::string::npos : filler.rfind(". ", at);
      const size_t word = at == 0 ? std::string::npos : filler.rfind(' ', at);
      at = sentence != std::string::npos ? sentence + 1 : word != std::string::npos ? word : 0;
      Trial t;
      // GCC 12 warns (-Wrestrict, a false positive) on "literal" + std::string; append instead.
      t.label.append("p").append(std::to_string(pi + 1)).append("@").append(std::to_string(d)).append("%");
      // The needle starts after a space (or the text's start) and ends before the filler's space.
      std::string needle;
      needle.append("The pass key is ").append(key).append(". Remember it. ").append(key).append(" is the pass key.");
      if (at > 0) needle.insert(needle.begin(), ' ');
      else if (!filler.empty()) needle.push_back(' ');
      t.context = filler.substr(0, at) + needle + filler.substr(at);
      RetrievalProbe probe;
      probe.prompt = "\nWhat is the pass key? The pass key is";
      probe.expected = key;
      probe.number = true;
      t.probes.push_back(std::move(probe));
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace

int cmd_transfer_retrieval(int argc, char** argv) {
  TransferPairArgs pair;
  std::string corpus, task = "verses", hybrid_arg = "8,32,64,128", depth_arg = "10,50,90", csv_path, rare_corpus;
  int64_t threads = 0, ctx_bytes = 1500, n_probes = 4, words = 4, max_passages = 20, seed = 1, check_layer = 1;
  ArgParser p("transfer-retrieval",
              "Recall from the context after native prefill, a transferred cache, no context and hybrids: hits per "
              "mode. --task verses: a verse's reference and first word asked after the verses, a hit when its next "
              "--words words come back. --task passkey: a random 5-digit key planted in filler text at each --depths "
              "percentage (\"The pass key is K. Remember it. K is the pass key.\"), asked for after it (\"What is "
              "the pass key? The pass key is\"), a hit when the continuation's first number is the key.");
  add_transfer_pair_options(p, &pair);
  p.add_string("--task", &task, "verses | passkey");
  p.add_string("--corpus", &corpus,
               "held-out text. verses: one \"REF text\" per line, chapters separated by blank lines; passkey: filler "
               "passages separated by blank lines (or one per line), e.g. scripts/make_transfer_corpus.sh's output",
               true);
  p.add_string("--hybrid", &hybrid_arg,
               "hybrid modes, comma-separated: last:K (or K: the receiver recomputes the context's last K tokens), "
               "last:P% (its last P percent), "
               "dev:R (it recomputes the share R of tokens whose K deviates most at --check-layer), first:K (its "
               "first K tokens; default 1), rare:R or rare:P% (the share of the context's tokens least seen in "
               "the map's fitting text; rare:R:N, at most N of them; each with around:B:A neighbours before and after it, default 4:1; around:W, W either side), parts joined by '+' (dev:R+last:K)");
  p.add_int("--check-layer", &check_layer, "dev:R modes: every token runs natively through layers 0..this one", 0, 1024);
  p.add_string("--rare-corpus", &rare_corpus,
               "rare:R modes: the map's fitting text (fit-transfer --corpus), whose token counts rank the context's tokens, "
               "for a map fitted before maps kept them (default: the map's own counts)");
  p.add_string("--csv", &csv_path, "also write the per-mode hit rates to this CSV file (for scripts/plot_transfer_tradeoff.py)");
  p.add_int("--context-bytes", &ctx_bytes, "context length in bytes (verses: whole verses; passkey: filler, whole words)", 64,
            1 << 20);
  p.add_int("--probes", &n_probes, "verses: verses asked per context", 1, 64);
  p.add_int("--words", &words, "verses: words after the verse's first that must match exactly", 1, 64);
  p.add_string("--depths", &depth_arg, "passkey: depths of the key in the filler, percent, comma-separated (a context each)");
  p.add_int("--seed", &seed, "passkey: seed of the keys", 0, int64_t(1) << 62);
  p.add_int("--max-passages", &max_passages, "chapters / filler passages to use", 1, 1 << 20);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (task != "verses" && task != "passkey") return cli_fail("--task: expected verses or passkey, got '" + task + "'");
  auto modes = parse_hybrid_modes("--hybrid", hybrid_arg, int(check_layer));
  if (!modes.ok()) return cli_fail(modes.error());
  auto depths = parse_int_list("--depths", depth_arg, 0, 100);
  if (!depths.ok()) return cli_fail(depths.error());
  auto setup = load_transfer_setup(pair, corpus);
  if (!setup.ok()) return cli_fail(setup.error());
  const std::vector<Trial> trials =
      task == "verses" ? verse_trials(setup->corpus, ctx_bytes, n_probes, words, max_passages)
                       : passkey_trials(setup->corpus, ctx_bytes, *depths, uint64_t(seed), max_passages);
  if (trials.empty()) {
    return cli_fail(task == "verses" ? "no chapter in '" + corpus + "' has enough verses for " +
                                           std::to_string(n_probes) + " probes"
                                     : "no filler passage in '" + corpus + "'");
  }
  if (check_layer >= setup->receiver->config().n_layer)
    return cli_fail("--check-layer " + std::to_string(check_layer) + ": " + setup->receiver->name + " has " +
                    std::to_string(setup->receiver->config().n_layer) + " layers");
  auto rare_counts = rare_counts_for(*setup, rare_corpus);
  if (!rare_counts.ok()) return cli_fail(rare_counts.error());
  if (auto st = attach_rare_counts(*modes, *rare_counts); !st.ok()) return cli_fail(st.error());
  std::vector<KvTransferOptions> hybrid;
  for (const HybridMode& m : *modes) hybrid.push_back(m.options);
  ThreadPool pool{int(threads)};

  RetrievalHits total;
  total.hybrid.assign(hybrid.size(), 0);
  std::vector<double> share(hybrid.size(), 0.0);  // summed over contexts: native_work_share
  double pure_share = 0;
  int64_t ctx_tokens = 0;
  std::printf("%-10s %5s %6s %7s %9s %7s", "passage", "ctx", "probes", "native", "transfer", "no-ctx");
  for (const HybridMode& m : *modes) std::printf(" %10s", m.label.c_str());
  std::printf("\n");
  for (const Trial& t : trials) {
    auto h = measure_retrieval(setup->map, *setup->sender, *setup->receiver, t.context, t.probes, hybrid, pool);
    if (!h.ok()) return cli_fail(h.error());
    std::printf("%-10s %5lld %6d %7d %9d %7d", t.label.c_str(), (long long)h->n_context_tokens, h->n_probes, h->native,
                h->transferred, h->no_context);
    for (size_t i = 0; i < hybrid.size(); ++i) std::printf(" %10d", h->hybrid[i]);
    std::printf("\n");
    std::fflush(stdout);
    total.n_probes += h->n_probes;
    total.native += h->native;
    total.transferred += h->transferred;
    total.no_context += h->no_context;
    for (size_t i = 0; i < hybrid.size(); ++i) {
      total.hybrid[i] += h->hybrid[i];
      share[i] += native_work_share(h->reports[i], setup->receiver->config().n_layer);
    }
    ctx_tokens += h->n_context_tokens;
    pure_share += native_work_share(h->transferred_report, setup->receiver->config().n_layer);
  }
  const double n = double(total.n_probes), used = double(trials.size());
  std::printf("%s hits over %d probes (%zu contexts, mean %.0f receiver tokens): native %d (%.3f), transferred %d "
              "(%.3f; %.1f%% of native prefill's work), no context %d (%.3f)",
              task.c_str(), total.n_probes, trials.size(), double(ctx_tokens) / used, total.native, total.native / n,
              total.transferred, total.transferred / n, 100.0 * pure_share / used, total.no_context, total.no_context / n);
  for (size_t i = 0; i < hybrid.size(); ++i) {
    std::printf(", hybrid %s %d (%.3f; %.1f%% of native prefill's work)", (*modes)[i].label.c_str(), total.hybrid[i],
                total.hybrid[i] / n, 100.0 * share[i] / used);
  }
  std::printf("\n");
  if (!csv_path.empty()) {
    std::FILE* csv = std::fopen(csv_path.c_str(), "w");
    if (!csv) return cli_fail("--csv: cannot write '" + csv_path + "'");
    std::fprintf(csv, "sender,receiver,task,mode,probes,hits,native_hits,native_work\n");
    const std::string pre = setup->sender->name + "," + setup->receiver->name + "," + task + ",";
    std::fprintf(csv, "%stransfer,%d,%d,%d,%.4f\n", pre.c_str(), total.n_probes, total.transferred, total.native,
                 pure_share / used);
    for (size_t i = 0; i < hybrid.size(); ++i)
      std::fprintf(csv, "%s%s,%d,%d,%d,%.4f\n", pre.c_str(), (*modes)[i].label.c_str(), total.n_probes, total.hybrid[i],
                   total.native, share[i] / used);
    if (std::fclose(csv) != 0) return cli_fail("--csv: cannot write '" + csv_path + "'");
  }
  return 0;
}

}  // namespace agentkv
