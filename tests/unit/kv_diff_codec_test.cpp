// Diff row formats (kv/kv_diff_codec.h) and their packing (share/master_diff.h's PackedKv) on
// synthetic K/V, no model: f16 rows restore bit for bit; int8 / int4 rows restore within the bound
// the format states, on every element of every row; a head with no difference restores its base
// exactly; packed rows take the blocks their record size says, and give them back when released.
#include "kv/kv_diff_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/fp16.h"
#include "share/master_diff.h"
#include "tiny_kv_config.h"

namespace agentkv {
namespace {
namespace diff_codec {

constexpr int kBlock = testing_kv::kBlock;
using testing_kv::make_two_head_manager;

// A base vector and a dense one near it (differences spanning magnitudes, head 1 of `zero_head`
// vectors left equal to the base).
void fill(std::mt19937& rng, kv_t* base, kv_t* dense, int n, bool zero_head) {
  std::normal_distribution<float> v(0, 3), d(0, 0.05f);
  for (int i = 0; i < n; ++i) {
    const float b = v(rng);
    base[i] = f32_to_fp16(b);
    const bool same = zero_head && i >= 8;
    dense[i] = same ? base[i] : f32_to_fp16(b + d(rng) * float(1 + (i % 5) * 10));
  }
}

// Every element of `restored` within the codec's bound of `dense`, head by head (bit equal for f16).
void expect_within_bound(const KvRowCodec& c, const uint8_t* rec, const kv_t* dense, const kv_t* restored,
                         const std::string& what) {
  for (int i = 0; i < c.kv_dim(); ++i) {
    if (diff_format_lossless(c.format())) {
      ASSERT_EQ(dense[i], restored[i]) << what << " element " << i;
      continue;
    }
    const float bound = c.error_bound(c.scale(rec, i / 8), restored[i]);
    ASSERT_LE(std::fabs(fp16_to_f32(restored[i]) - fp16_to_f32(dense[i])), bound) << what << " element " << i;
  }
}

TEST(DiffCodec, NamesParseAndUnknownOnesAreErrors) {
  for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4}) {
    auto p = parse_diff_format(diff_format_name(f));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, f);
  }
  auto bad = parse_diff_format("int3");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("int3"), std::string::npos);
  EXPECT_NE(bad.error().find("f16"), std::string::npos);
}

TEST(DiffCodec, RecordSizesAreTheFormatsAndAScalePerHead) {
  EXPECT_EQ(KvRowCodec(DiffFormat::kF16, 3, 16, 8).vector_bytes(), 32u);
  EXPECT_EQ(KvRowCodec(DiffFormat::kInt8, 3, 16, 8).vector_bytes(), 16u + 2 * 4);
  EXPECT_EQ(KvRowCodec(DiffFormat::kInt4, 3, 16, 8).vector_bytes(), 8u + 2 * 4);
  EXPECT_EQ(KvRowCodec(DiffFormat::kInt4, 3, 16, 8).record_bytes(), 6u * (8 + 2 * 4));
}

TEST(DiffCodec, VectorsRestoreBitForBitOrWithinTheStatedBound) {
  std::mt19937 rng(11);
  for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4}) {
    const KvRowCodec c(f, 1, 16, 8);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<kv_t> base(16), dense(16), out(16);
      fill(rng, base.data(), dense.data(), 16, trial % 3 == 0);
      std::vector<uint8_t> rec(c.vector_bytes());
      c.encode(dense.data(), base.data(), rec.data());
      out = base;
      c.decode(rec.data(), out.data());
      expect_within_bound(c, rec.data(), dense.data(), out.data(), std::string(diff_format_name(f)));
      if (trial % 3 == 0) {
        if (!diff_format_lossless(f)) {
          EXPECT_EQ(c.scale(rec.data(), 1), 0.0f);
        }
        for (int i = 8; i < 16; ++i) EXPECT_EQ(out[size_t(i)], base[size_t(i)]) << "an unchanged head restores its base";
      }
    }
  }
  // The bound is tight enough to mean something: int8's half step is 1/254 of the head's largest
  // difference, int4's 1/14.
  const KvRowCodec i8(DiffFormat::kInt8, 1, 16, 8), i4(DiffFormat::kInt4, 1, 16, 8);
  EXPECT_LT(i8.error_bound(1.0f / 127, f32_to_fp16(0.0f)), 0.004f);
  EXPECT_LT(i4.error_bound(1.0f / 7, f32_to_fp16(0.0f)), 0.072f);
}

TEST(PackedDiffRows, RowsPackAsManyToABlockAsFitAndRestoreWithinTheirBound) {
  auto m = make_two_head_manager(64);
  const KvArena& a = m->arena();
  // 10 dense rows and their bases in sequences of their own.
  KvSequence dense(*m), base(*m);
  ASSERT_TRUE(dense.reserve(10) && base.reserve(10));
  std::mt19937 rng(5);
  std::vector<PhysicalSlot> dslots, bslots;
  for (int i = 0; i < 10; ++i) {
    const PhysicalSlot d{dense.blocks()[size_t(i / kBlock)], i % kBlock}, b{base.blocks()[size_t(i / kBlock)], i % kBlock};
    for (int l = 0; l < a.n_layer(); ++l) {
      const PagedKvLayer L = a.layer(l);
      fill(rng, L.k(b.block, b.offset), L.k(d.block, d.offset), 16, i == 3);
      fill(rng, L.v(b.block, b.offset), L.v(d.block, d.offset), 16, false);
    }
    dslots.push_back(d);
    bslots.push_back(b);
  }
  const int64_t used0 = m->pool().stats().n_used;
  for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4}) {
    const std::string what(diff_format_name(f));
    {
      auto p = PackedKv::pack_rows(*m, dslots, f, bslots);
      ASSERT_TRUE(p) << what;
      const int64_t per_block = a.bytes_per_block() / int64_t(p->codec().record_bytes());
      EXPECT_EQ(p->n_blocks(), (10 + per_block - 1) / per_block) << what;
      EXPECT_EQ(p->payload_bytes(), 10 * int64_t(p->codec().record_bytes()));
      if (f == DiffFormat::kF16) {
        EXPECT_EQ(per_block, kBlock) << "f16 rows: a block's worth of tokens per block";
      } else {
        EXPECT_LT(p->n_blocks(), 3) << "fewer blocks than f16 rows' 3";
      }
      // Restored over a copy of each base (at other slots), every row within the bound.
      KvSequence dst(*m);
      ASSERT_TRUE(dst.reserve(11));
      for (int i = 0; i < 10; ++i) {
        const PhysicalSlot o{dst.blocks()[size_t((i + 1) / kBlock)], (i + 1) % kBlock};
        for (int l = 0; l < a.n_layer(); ++l) {
          const PagedKvLayer L = a.layer(l);
          std::copy_n(L.k(bslots[size_t(i)].block, bslots[size_t(i)].offset), 16, L.k(o.block, o.offset));
          std::copy_n(L.v(bslots[size_t(i)].block, bslots[size_t(i)].offset), 16, L.v(o.block, o.offset));
        }
        p->restore_row(i, o);
        const uint8_t* rec = p->record(i);
        const size_t vb = p->codec().vector_bytes();
        for (int l = 0; l < a.n_layer(); ++l) {
          const PagedKvLayer L = a.layer(l);
          const PhysicalSlot d = dslots[size_t(i)];
          expect_within_bound(p->codec(), rec + 2 * size_t(l) * vb, L.k(d.block, d.offset), L.k(o.block, o.offset),
                              what + " row " + std::to_string(i) + " K layer " + std::to_string(l));
          expect_within_bound(p->codec(), rec + (2 * size_t(l) + 1) * vb, L.v(d.block, d.offset),
                              L.v(o.block, o.offset), what + " row " + std::to_string(i) + " V layer " + std::to_string(l));
        }
      }
    }
    EXPECT_EQ(m->pool().stats().n_used, used0) << what << ": the packed rows' blocks went back";
  }
}

TEST(PackedDiffRows, APoolTooSmallIsReportedAndTakesNothing) {
  auto m = make_two_head_manager(3);
  KvSequence dense(*m), base(*m);
  ASSERT_TRUE(dense.reserve(kBlock) && base.reserve(kBlock));
  std::vector<PhysicalSlot> d(kBlock + 1, PhysicalSlot{dense.blocks()[0], 0}), b(kBlock + 1, PhysicalSlot{base.blocks()[0], 0});
  // One block left: five f16 rows need two, five int8 rows fit in one.
  EXPECT_FALSE(PackedKv::pack_rows(*m, d, DiffFormat::kF16));
  EXPECT_EQ(m->pool().stats().n_used, 2);
  auto p = PackedKv::pack_rows(*m, d, DiffFormat::kInt8, b);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->n_blocks(), 1);
}

}  // namespace diff_codec
}  // namespace
}  // namespace agentkv
