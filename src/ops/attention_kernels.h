// Internal: the per-ISA implementations behind ops/attention.h.
#pragma once

#include "ops/attention.h"

namespace agentkv::attention_impl {

using AttendFn = void (*)(const float*, int, const PagedKvLayer&, const int32_t*, int64_t, int64_t, int, int,
                          float, float*, float*);
using StoreFn = void (*)(kv_t*, const float*, int);
using LoadFn = void (*)(float*, const kv_t*, int);

void attend_group_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                         int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch);
void kv_store_scalar(kv_t* dst, const float* src, int n);
void kv_load_scalar(float* dst, const kv_t* src, int n);

// AVX2 + F16C (attention_avx2.cpp). head_dim must be a multiple of 8; other sizes use scalar.
void attend_group_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                       int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch);
void kv_store_avx2(kv_t* dst, const float* src, int n);
void kv_load_avx2(float* dst, const kv_t* src, int n);

// Softmax of each of n_q rows of n scores in place, then rounds the weights to f16 as ggml does.
void softmax_rows_f16_weights(float* scratch, int n_q, int64_t n);

}  // namespace agentkv::attention_impl
