// The transfer map file round-trips exactly and refuses damage: any flipped byte (checksum),
// truncation, another file format, and inconsistent geometry, each with an error that says so.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>

#include "gguf/gguf_writer.h"
#include "transfer/transfer_map.h"

namespace agentkv {
namespace {

TransferMap small_map() {
  TransferMap m;
  m.sender_fingerprint = 0x1111222233334444ull;
  m.receiver_fingerprint = 0x5555666677778888ull;
  m.sender_name = std::string(1, 'a');
  m.receiver_name = std::string(1, 'b');
  m.sender_n_layer = 3;
  m.sender_kv_dim = 4;
  m.receiver_n_layer = 2;
  m.receiver_kv_dim = 6;
  m.sender_layer = depth_proportional_layers(2, 3);
  m.ridge_alpha = 1e-3;
  m.n_fit_tokens = 77;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int l = 0; l < 2; ++l) {
    std::vector<float> w(size_t(m.in_dim() * m.out_dim()));
    for (float& v : w) v = u(rng);
    m.weights.push_back(w);
  }
  return m;
}

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

std::vector<char> slurp_map(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}
void spit(const std::string& p, const std::vector<char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(b.data(), std::streamsize(b.size()));
}

TEST(TransferMapFile, DepthProportionalLayersMapEndsToEnds) {
  EXPECT_EQ(depth_proportional_layers(18, 30).front(), 0);
  EXPECT_EQ(depth_proportional_layers(18, 30).back(), 29);
  EXPECT_EQ(depth_proportional_layers(30, 18).back(), 17);
  EXPECT_EQ(depth_proportional_layers(30, 30)[13], 13);
  const auto m = depth_proportional_layers(30, 18);
  for (size_t i = 1; i < m.size(); ++i) EXPECT_GE(m[i], m[i - 1]);
}

// A window of sender layers is centred on the depth-proportional layer and moved inwards at the ends,
// so every window lies inside the sender.
TEST(TransferMapFile, SenderLayerWindowsStayInsideTheSender) {
  EXPECT_EQ(sender_layer_windows(30, 18, 1), depth_proportional_layers(30, 18));
  const auto centre = depth_proportional_layers(30, 18);
  for (int w : {2, 3, 5, 18}) {
    const auto first = sender_layer_windows(30, 18, w);
    ASSERT_EQ(first.size(), 30u);
    for (size_t l = 0; l < first.size(); ++l) {
      EXPECT_GE(first[l], 0) << w;
      EXPECT_LE(first[l] + w, 18) << w;
      // The depth-proportional layer is inside its window.
      EXPECT_LE(first[l], centre[l]) << w << " " << l;
      EXPECT_GT(first[l] + w, centre[l]) << w << " " << l;
    }
  }
  EXPECT_EQ(sender_layer_windows(18, 30, 3)[5], depth_proportional_layers(18, 30)[5] - 1);  // centred
  EXPECT_EQ(sender_layer_windows(18, 30, 3).front(), 0);
  EXPECT_EQ(sender_layer_windows(18, 30, 3).back(), 27);
}

// A windowed map keeps its window in the file (and the features it reads grow with it); one-layer
// maps write no key, so their files are what they always were.
TEST(TransferMapFile, RecordsTheSenderWindow) {
  TransferMap m = small_map();
  const int one_layer_in = m.in_dim();
  m.sender_window = 2;
  m.sender_layer = sender_layer_windows(2, 3, 2);
  EXPECT_EQ(m.in_dim(), one_layer_in + 2 * m.sender_kv_dim);
  for (auto& w : m.weights) w.resize(size_t(m.in_dim() * m.out_dim()), 0.5f);
  const std::string p = temp_path("map_window.gguf");
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  auto r = read_transfer_map(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->sender_window, 2);
  EXPECT_EQ(r->sender_layer, m.sender_layer);
  EXPECT_EQ(r->weights, m.weights);
  std::remove(p.c_str());

  // A window reaching past the sender's last layer is refused, naming the window.
  m.sender_layer[1] = 2;
  const Status st = save_transfer_map(m, p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("window of 2"), std::string::npos) << st.error();
  m.sender_layer[1] = 1;
  m.sender_window = 4;  // the sender has 3 layers
  EXPECT_FALSE(save_transfer_map(m, p).ok());
}

TEST(TransferMapFile, ProjectRowsMatchesScalarProject) {
  const TransferMap m = small_map();
  const int n = 5;
  std::vector<float> x(size_t(n * m.in_dim())), y(size_t(n * m.out_dim())), one(size_t(m.out_dim()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i % 7) - 3) * 0.25f;
  ThreadPool pool(2);
  m.project_rows(1, x.data(), n, y.data(), pool);
  for (int r = 0; r < n; ++r) {
    m.project(1, x.data() + r * m.in_dim(), one.data());
    // The matmul kernels sum in another order: |y| <= 9 * 0.75 here, so 1e-5 is a few ULPs.
    for (int j = 0; j < m.out_dim(); ++j) EXPECT_NEAR(y[size_t(r * m.out_dim() + j)], one[size_t(j)], 1e-5f) << r << "," << j;
  }
}

TEST(TransferMapFile, RoundTripsExactly) {
  const TransferMap m = small_map();
  const std::string p = temp_path("map_roundtrip.gguf");
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  auto r = read_transfer_map(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->sender_fingerprint, m.sender_fingerprint);
  EXPECT_EQ(r->receiver_fingerprint, m.receiver_fingerprint);
  EXPECT_EQ(r->sender_layer, m.sender_layer);
  EXPECT_EQ(r->n_fit_tokens, 77);
  EXPECT_EQ(r->weights, m.weights);
  EXPECT_EQ(r->pooling, SpanPooling::mean);
  EXPECT_TRUE(r->layer_alpha.empty());
  std::remove(p.c_str());
}

// The ridge chosen per layer by held-out error is recorded (as floats) and read back.
TEST(TransferMapFile, RecordsPerLayerRidge) {
  TransferMap m = small_map();
  m.layer_alpha.assign(size_t(m.receiver_n_layer), 0.0);
  for (size_t l = 0; l < m.layer_alpha.size(); ++l) m.layer_alpha[l] = l % 2 ? 0.25 : 1e-3;
  const std::string p = temp_path("map_layer_alpha.gguf");
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  auto r = read_transfer_map(p);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->layer_alpha.size(), m.layer_alpha.size());
  for (size_t l = 0; l < m.layer_alpha.size(); ++l) EXPECT_DOUBLE_EQ(r->layer_alpha[l], double(float(m.layer_alpha[l])));
  std::remove(p.c_str());
}

// The fitting text's receiver token counts (for the hybrid by rarity) are kept exactly; a map saved
// without them reads back without them, and counts that do not fit are refused.
TEST(TransferMapFile, RecordsTheFittingTextsTokenCounts) {
  TransferMap m = small_map();
  m.receiver_token_counts = {0, 5, 123456789, 1, 0, 7};
  const std::string p = temp_path("map_counts.gguf");
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  auto r = read_transfer_map(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->receiver_token_counts, m.receiver_token_counts);
  EXPECT_EQ(r->weights, m.weights);
  m.receiver_token_counts.clear();
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  r = read_transfer_map(p);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->receiver_token_counts.empty());
  std::remove(p.c_str());
}

TEST(TransferMapFile, RecordsThePoolingRule) {
  for (SpanPooling rule : {SpanPooling::overlap, SpanPooling::last}) {
    TransferMap m = small_map();
    m.pooling = rule;
    const std::string p = temp_path("map_pooling.gguf");
    ASSERT_TRUE(save_transfer_map(m, p).ok());
    auto r = read_transfer_map(p);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->pooling, rule);
    std::remove(p.c_str());
  }
  EXPECT_FALSE(parse_span_pooling("median").has_value());
  EXPECT_EQ(parse_span_pooling("overlap"), SpanPooling::overlap);
}

TEST(TransferMapFile, RefusesCorruption) {
  const TransferMap m = small_map();
  const std::string p = temp_path("map_corrupt.gguf");
  ASSERT_TRUE(save_transfer_map(m, p).ok());
  const std::vector<char> good = slurp_map(p);

  std::vector<char> flipped = good;
  flipped[flipped.size() - 5] ^= 0x40;  // inside the last weight tensor
  spit(p, flipped);
  auto r = read_transfer_map(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("corrupted"), std::string::npos) << r.error();

  spit(p, std::vector<char>(good.begin(), good.begin() + std::ptrdiff_t(good.size() / 2)));
  r = read_transfer_map(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("transfer map"), std::string::npos) << r.error();

  r = read_transfer_map(p + ".missing");
  EXPECT_FALSE(r.ok());
  std::remove(p.c_str());
}

// Format version 2 seals every byte: any single flipped byte (a fingerprint, a name, the layer map,
// the pooling rule, padding, a weight) is refused, never loaded as a different map.
TEST(TransferMapFile, EveryFlippedByteIsRefused) {
  const std::string p = temp_path("map_flip.gguf");
  ASSERT_TRUE(save_transfer_map(small_map(), p).ok());
  const std::vector<char> good = slurp_map(p);
  for (size_t at = 0; at < good.size(); ++at) {
    std::vector<char> bad = good;
    bad[at] = char(bad[at] ^ 0x01);
    spit(p, bad);
    auto r = read_transfer_map(p);
    ASSERT_FALSE(r.ok()) << "byte " << at << " of " << good.size() << " flipped and accepted";
    EXPECT_NE(r.error().find(p), std::string::npos) << r.error();
  }
  std::remove(p.c_str());
}

TEST(TransferMapFile, AnOlderVersionSaysHowToRecreateIt) {
  const std::string p = temp_path("map_v1.gguf");
  GgufWriter w;
  w.add_string("general.architecture", "agentkv-transfer");
  w.add<uint32_t>("transfer.format_version", 1);
  ASSERT_TRUE(w.write_file(p).ok());
  auto r = read_transfer_map(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("re-create it with agentkv fit-transfer"), std::string::npos) << r.error();
  std::remove(p.c_str());
}

TEST(TransferMapFile, RefusesInconsistentMap) {
  TransferMap m = small_map();
  m.sender_layer[1] = 3;  // the sender has 3 layers
  const Status st = save_transfer_map(m, temp_path("map_bad.gguf"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("out of range"), std::string::npos) << st.error();
}

}  // namespace
}  // namespace agentkv
