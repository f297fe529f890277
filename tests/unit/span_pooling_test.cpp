// The pooling rules that build a receiver token's transfer features from the sender tokens covering
// its bytes: weights per rule on a hand-made alignment, and the features they give.
#include <gtest/gtest.h>

#include "transfer/paired_features.h"

namespace agentkv {
namespace {

// Text of 10 bytes. Receiver: [0,4) [4,10). Sender: [0,1) [1,6) [6,10).
// Receiver token 0 is covered by sender 0 (1 byte) and 1 (3 of its 5 bytes); token 1 by sender 1
// (2 bytes) and 2 (4 bytes).
struct SpanFixture {
  TokenSpans receiver, sender;
  TokenAlignment align;
  SpanFixture() {
    receiver.tokens = {10, 11};
    receiver.begin = {0, 4};
    receiver.end = {4, 10};
    receiver.text_bytes = 10;
    sender.tokens = {20, 21, 22};
    sender.begin = {0, 1, 6};
    sender.end = {1, 6, 10};
    sender.text_bytes = 10;
    align = align_tokens(receiver, sender);
  }
};

TEST(SpanPooling, AlignmentOfTheFixture) {
  SpanFixture f;
  EXPECT_EQ(f.align.first, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.align.count, (std::vector<int32_t>{2, 2}));
}

TEST(SpanPooling, WeightsPerRule) {
  SpanFixture f;
  const SpanWeights mean = span_weights(f.align, f.receiver, f.sender, SpanPooling::mean);
  EXPECT_EQ(mean.w, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  const SpanWeights last = span_weights(f.align, f.receiver, f.sender, SpanPooling::last);
  EXPECT_EQ(last.w, (std::vector<float>{0.0f, 1.0f, 0.0f, 1.0f}));
  const SpanWeights overlap = span_weights(f.align, f.receiver, f.sender, SpanPooling::overlap);
  ASSERT_EQ(overlap.w.size(), 4u);
  EXPECT_FLOAT_EQ(overlap.w[0], 0.25f);
  EXPECT_FLOAT_EQ(overlap.w[1], 0.75f);
  EXPECT_FLOAT_EQ(overlap.w[2], 2.0f / 6.0f);
  EXPECT_FLOAT_EQ(overlap.w[3], 4.0f / 6.0f);
  EXPECT_EQ(overlap.offset, (std::vector<int64_t>{0, 2, 4}));
}

TEST(SpanPooling, FeaturesAreTheWeightedRows) {
  SpanFixture f;
  LayerKv kv;
  kv.n_tokens = 3;
  kv.kv_dim = 2;
  kv.k = {1, 2, 3, 4, 5, 6};       // token s: (2s+1, 2s+2)
  kv.v = {-1, -2, -3, -4, -5, -6};
  std::vector<float> x(5);
  const SpanWeights overlap = span_weights(f.align, f.receiver, f.sender, SpanPooling::overlap);
  pooled_sender_features(kv, f.align, overlap, 0, x.data());
  EXPECT_FLOAT_EQ(x[0], 0.25f * 1 + 0.75f * 3);
  EXPECT_FLOAT_EQ(x[1], 0.25f * 2 + 0.75f * 4);
  EXPECT_FLOAT_EQ(x[2], -(0.25f * 1 + 0.75f * 3));
  EXPECT_FLOAT_EQ(x[4], 1.0f);
  const SpanWeights mean = span_weights(f.align, f.receiver, f.sender, SpanPooling::mean);
  pooled_sender_features(kv, f.align, mean, 1, x.data());
  EXPECT_FLOAT_EQ(x[0], 4.0f);
  EXPECT_FLOAT_EQ(x[3], -5.0f);
  const SpanWeights last = span_weights(f.align, f.receiver, f.sender, SpanPooling::last);
  pooled_sender_features(kv, f.align, last, 1, x.data());
  EXPECT_EQ(x, (std::vector<float>{5, 6, -5, -6, 1}));
}

// A window of sender layers: each layer's pooled K/V side by side, then one bias, and each layer's
// part equal to what that layer alone gives.
TEST(SpanPooling, WindowFeaturesAreEachLayersSideBySide) {
  SpanFixture f;
  LayerKv a, b;
  a.n_tokens = b.n_tokens = 3;
  a.kv_dim = b.kv_dim = 2;
  a.k = {1, 2, 3, 4, 5, 6};
  a.v = {-1, -2, -3, -4, -5, -6};
  b.k = {10, 20, 30, 40, 50, 60};
  b.v = {7, 8, 9, 10, 11, 12};
  const SpanWeights last = span_weights(f.align, f.receiver, f.sender, SpanPooling::last);
  const LayerKv* window[] = {&a, &b};
  std::vector<float> x(9, -99.0f);
  pooled_sender_window_features(window, f.align, last, 1, x.data());
  EXPECT_EQ(x, (std::vector<float>{5, 6, -5, -6, 50, 60, 11, 12, 1}));
  const SpanWeights overlap = span_weights(f.align, f.receiver, f.sender, SpanPooling::overlap);
  std::vector<float> one(5), two(5);
  pooled_sender_window_features(window, f.align, overlap, 0, x.data());
  pooled_sender_features(a, f.align, overlap, 0, one.data());
  pooled_sender_features(b, f.align, overlap, 0, two.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(x[size_t(i)], one[size_t(i)]);
    EXPECT_EQ(x[size_t(4 + i)], two[size_t(i)]);
  }
  EXPECT_EQ(x[8], 1.0f);
}

}  // namespace
}  // namespace agentkv
