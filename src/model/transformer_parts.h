// Pieces both architectures share: weight lookup with shape checks, embedding lookup, the KV write,
// attention over the paged KV of every sequence in a batch, and the LM head.
#pragma once

#include <string>
#include <vector>

#include "model/batch.h"
#include "model/kv_arena.h"
#include "model/lora_adapters.h"
#include "model/model_config.h"
#include "ops/rope.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

class GgufFile;

// A 2-D weight [rows][cols] (GGUF ne = {cols, rows}) of a type the matmul kernels support.
Result<WeightView> find_matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows);
// Rows [row_begin, row_begin + n_rows) of a 2-D weight of total_rows rows (a part of a fused tensor:
// Phi-3's attn_qkv, its gate+up ffn_up), as a matrix of its own; no copy.
Result<WeightView> find_matrix_rows(const GgufFile& f, const std::string& name, int64_t cols, int64_t total_rows,
                                    int64_t row_begin, int64_t n_rows);
// A 1-D F32 vector of length n (norm weights).
Result<const float*> find_vector(const GgufFile& f, const std::string& name, int64_t n);

// The projections every block has, looked up as blk.N.{attn_q,attn_k,attn_v,attn_output} and
// blk.N.{ffn_gate,ffn_up,ffn_down} with their shapes checked against the config.
struct AttentionWeights {
  WeightView wq, wk, wv, wo;
};
struct FfnWeights {
  WeightView gate, up, down;
};
Result<AttentionWeights> find_attention(const GgufFile& f, const std::string& prefix, const ModelConfig& cfg);
Result<FfnWeights> find_ffn(const GgufFile& f, const std::string& prefix, const ModelConfig& cfg);
// token_embd.weight; sets cfg.n_vocab from its shape.
Result<WeightView> find_embedding(const GgufFile& f, ModelConfig& cfg);

// x[t][n_embd] = scale * embedding row of token t.
void embed_tokens(const WeightView& emb, const Batch& b, float scale, float* x, ThreadPool& pool);

// dst[t] = rms_norm(src[t]) * w for each of the n_tokens rows of width d (src may equal dst).
void norm_rows(const float* src, const float* w, float* dst, int64_t n_tokens, int d, float eps, ThreadPool& pool);

// Writes each token's K and V ([n_tokens][kv_dim]) into its slot of layer il.
void write_kv(const Batch& b, const KvArena& kv, int il, const float* k, const float* v);

// The sliding window layer il attends within (0: every earlier slot).
int layer_window(const ModelConfig& cfg, int il);
// The first slot a token at `slot` attends to under `window`.
int64_t first_attended_slot(int64_t slot, int window);

// out[t][n_head*head_dim] = attention of q[t] over slots [lo, slot_t] of the token's sequence, where
// lo = slot_t - window + 1 for a sliding-window layer (window > 0) and 0 otherwise.
void attention(const ModelConfig& cfg, const Batch& b, const KvArena& kv, int il, const float* q,
               int window, float scale, float* out, ThreadPool& pool);

// What some families add to an attention block: biases on the Q/K/V projections (Qwen2) and a
// per-head RMS norm of Q and K before RoPE (Qwen3, Gemma 3). Null: absent.
struct AttentionExtras {
  const float* bq = nullptr;      // [q_dim]
  const float* bk = nullptr;      // [kv_dim]
  const float* bv = nullptr;      // [kv_dim]
  const float* q_norm = nullptr;  // [head_dim]
  const float* k_norm = nullptr;  // [head_dim]
  // > 0 (Phi-3, Gemma 2): Q is multiplied by q_scale after RoPE and the scores are not scaled
  // (llama.cpp's order for those families; 0: scores scaled by 1/sqrt(head_dim)).
  float q_scale = 0.0f;
};

// One block of a pre-norm decoder, as every supported architecture has it; the sandwich norms after
// attention and FFN are Gemma's (null: absent).
struct DecoderLayer {
  const float* attn_norm = nullptr;
  AttentionWeights attn;
  AttentionExtras extras;
  const float* post_attn_norm = nullptr;
  const float* ffn_norm = nullptr;
  FfnWeights ffn;
  const float* post_ffn_norm = nullptr;
};

enum class FfnActivation { kSilu, kGeluTanh };  // act(gate) * up

// Everything a pass needs beyond the config: what the decoders run on, and what a second pass over
// the same weights (the verifier's training pass, src/prm/) reads instead of a copy.
struct DecoderWeights {
  std::vector<DecoderLayer> layers;
  WeightView embd;
  float embd_scale = 1.0f;  // Gemma: sqrt(n_embd)
  FfnActivation activation = FfnActivation::kSilu;
  const float* out_norm = nullptr;
  WeightView head;  // the embedding when tied
};

// y = W x for the batch's tokens, plus the batch's adapters for projection p of layer il on its
// logit-row tokens (model/batch.h).
void project(const WeightView& w, const Batch& b, int il, LoraProj p, const float* x, float* y, ThreadPool& pool);

// What attention multiplies Q.K by: 1 when Q was scaled after RoPE (q_scale > 0), else 1/sqrt(head_dim).
float attention_score_scale(const ModelConfig& c, const AttentionExtras& x);

// The per-forward buffers of attention_block for n tokens.
struct AttentionScratch {
  std::vector<float> q, k, v, att;
  AttentionScratch(const ModelConfig& c, int64_t n)
      : q(size_t(n * c.q_dim())), k(size_t(n * c.kv_dim())), v(size_t(n * c.kv_dim())), att(size_t(n * c.q_dim())) {}
};

// One attention sub-block of layer il on the normed input h [n_tokens][n_embd]: the Q/K/V
// projections (and biases), Q/K head norms, RoPE at each token's position, the K/V write, attention
// over window slots (0: all) with scale 1/sqrt(head_dim), and the output projection into out.
void attention_block(const ModelConfig& c, const Batch& b, const KvArena& kv, int il, const AttentionWeights& w,
                     const AttentionExtras& x, const Rope& rope, int window, const float* h, float* out,
                     AttentionScratch& s, ThreadPool& pool);

// Final norm of the rows in b.logit_rows, then logits = head · x.
// softcap > 0: logits -> softcap * tanh(logit / softcap) (Gemma 2).
void lm_head(const WeightView& head, const float* out_norm, float eps, const Batch& b, const float* x,
             int n_embd, float* logits, ThreadPool& pool, float softcap = 0.0f);

}  // namespace agentkv
