#!/usr/bin/env python3
"""Tiny random-weight GGUFs of the architectures agentkv loads beside its two real models, for the
architecture tests (tests/model/arch_golden_test.cpp) and their llama.cpp goldens
(scripts/make_arch_goldens.py).

Each file has 3 layers, small dimensions, Q8_0 matrices (F32 norms and biases) and SmolLM2's real
tokenizer (copied from its GGUF), so llama.cpp loads it as it loads a real model. Weights come from a
fixed numpy seed per architecture: the same script writes the same bytes (the goldens record each
file's sha256 and the test checks it).

  make_arch_ggufs.py OUT_DIR [--models DIR] [--chat-templates]   (DIR: where SmolLM2-135M-Instruct.Q4_1.gguf is)

--chat-templates: each file also carries its family's own chat template (tokenizer.chat_template, the
texts of tests/data/chat_templates/goldens.json, per CHAT_TEMPLATES), for the served-path test of the
chat formats (tests/e2e/tool_formats_e2e.py); the architecture goldens are of the files without it.
"""
import argparse
import hashlib
import os
import sys

import numpy as np
import gguf

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"

# name: (architecture, head_dim, extra parts, pre-tokenizer). The Qwen files name the "qwen2"
# pre-tokenizer, the llama3 file "llama-bpe" (as Llama 3.x files do) and the phi3 file "gpt-4o" (Phi-3
# has a SentencePiece vocabulary of its own; this one is only a carrier) over SmolLM2's vocabulary and
# merges, so the tokenizer goldens check those splitters; gemma2 keeps "smollm".
ARCHS = {
    "qwen2": ("qwen2", 32, {"qkv_bias"}, "qwen2"),
    "qwen3": ("qwen3", 64, {"qk_norm"}, "qwen2"),   # head_dim 64 != n_embd / n_head = 32, as in Qwen3
    # Llama 3.x frequency scaling (rope_freqs.weight); "unreachable": see UNREACHABLE_MERGES below.
    "llama3": ("llama", 32, {"rope_freqs", "unreachable"}, "llama-bpe"),
    "phi3": ("phi3", 32, {"fused"}, "gpt-4o"),  # attn_qkv and gate+up ffn_up fused, as Phi-3 files are
    # Phi-3 128k / Phi-3.5's LongRoPE: rope_factors_long/short.weight, an original context of
    # LONGROPE_ORIG_CTX and the attention factor the converter derives (see longrope_factors below).
    "phi3-longrope": ("phi3", 32, {"fused", "longrope"}, "gpt-4o"),
    # Soft-capped scores and logits, alternating 64-slot sliding window, sandwich norms, tied head.
    "gemma2": ("gemma2", 32, {"gemma"}, "smollm"),
}
# Every SmolLM2 token is what its merges make of its own text, so llama-bpe's ignore_merges (a
# pre-token that is a vocab entry is taken whole) would change nothing; and it has one-digit tokens
# only, so llama-bpe's digit runs in threes would give the ids of single digits. Llama 3's vocabulary
# has tokens the merges never build, and so does the llama3 file: leaving out the last merge of
# " hello" and "Hello" ("Ġ" is the byte-level space), and renaming three of the last tokens
# (" exfol", " Mama", "ectable") to digit runs that no merge builds, which only ignore_merges gives
# whole and only the grouping in threes makes into pieces.
UNREACHABLE_MERGES = {"Ġhel lo", "H ello"}
UNREACHABLE_TOKENS = {49149: "123", 49150: "555", 49151: "777"}
# The template each file carries with --chat-templates (keys of goldens.json's "templates").
CHAT_TEMPLATES = {"qwen2": "qwen2.5", "qwen3": "qwen3", "llama3": "llama3.1", "phi3": "phi3.5", "gemma2": "gemma2"}
CHAT_GOLDENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "chat_templates",
                            "goldens.json")
N_EMBD, N_HEAD, N_HEAD_KV, N_FF, N_LAYER, N_CTX = 128, 4, 2, 256, 3, 2048
# llama.cpp rounds every context up to a multiple of 256 before it compares it with the original
# context, so 256 is the smallest at which its short factors can apply (a context of 256: short; 512: long).
LONGROPE_ORIG_CTX = 256


def tokenizer_fields(models_dir):
    r = gguf.GGUFReader(os.path.join(models_dir, SMOLLM2))

    def field(name):
        return r.fields[name]

    def strings(name):
        f = field(name)
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(name):
        f = field(name)
        return int(f.parts[f.data[0]][0])

    return {
        "tokens": strings("tokenizer.ggml.tokens"),
        "types": [int(field("tokenizer.ggml.token_type").parts[i][0]) for i in field("tokenizer.ggml.token_type").data],
        "merges": strings("tokenizer.ggml.merges"),
        "bos": scalar("tokenizer.ggml.bos_token_id"),
        "eos": scalar("tokenizer.ggml.eos_token_id"),
    }


def llama3_freq_factors(n_rot, base=500000.0, factor=8.0, low=1.0, high=4.0, orig_ctx=8192):
    """Llama 3.1's rope scaling as the GGUF converter writes it (rope_freqs.weight)."""
    freqs = 1.0 / (base ** (np.arange(0, n_rot, 2, dtype=np.float64) / n_rot))
    low_wavelen, high_wavelen = orig_ctx / low, orig_ctx / high
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (orig_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def longrope_factors(n_rot):
    """Short and long factor sets shaped like Phi-3.5's: the short ones near 1, the long ones rising
    from 1 to ~40 toward the low frequencies; and the attention factor Phi-3's converter writes,
    sqrt(1 + ln(scale) / ln(original context)) with scale = context length / original context."""
    i = np.arange(n_rot // 2, dtype=np.float64) / (n_rot // 2 - 1)
    short = 1.0 + 0.5 * i ** 2
    long = 1.0 + 39.0 * i ** 3
    scale = N_CTX / LONGROPE_ORIG_CTX
    attn_factor = float(np.sqrt(1.0 + np.log(scale) / np.log(LONGROPE_ORIG_CTX)))
    return short.astype(np.float32), long.astype(np.float32), attn_factor


def write(out_dir, name, tok, chat_template=None):
    arch, head_dim, extra, pre = ARCHS[name]
    rng = np.random.default_rng(sum(map(ord, name)))  # fixed per architecture
    n_vocab = len(tok["tokens"])
    q_dim, kv_dim = N_HEAD * head_dim, N_HEAD_KV * head_dim
    path = os.path.join(out_dir, f"{name}.gguf")
    w = gguf.GGUFWriter(path, arch)
    # Not the family's name: llama.cpp sets token attributes by model name ("phi3" looks up "</s>",
    # which SmolLM2's vocabulary does not have).
    w.add_name("agentkv tiny test file")
    w.add_block_count(N_LAYER)
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_layer_norm_rms_eps(1e-6)
    # The LongRoPE file has Phi-3's own base: its factors then change angles a prompt of 86 or 400
    # tokens goes through.
    w.add_rope_freq_base({"llama3": 500000.0, "phi3-longrope": 10000.0}.get(name, 1000000.0))
    if head_dim != N_EMBD // N_HEAD:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    if "longrope" in extra:
        w.add_rope_scaling_orig_ctx_len(LONGROPE_ORIG_CTX)
        w.add_rope_scaling_attn_factors(longrope_factors(head_dim)[2])
    if "gemma" in extra:
        # Small caps and window, so that the tiny model's scores, logits and 86/400-token prompts
        # depend on them.
        w.add_float32("gemma2.attn_logit_softcapping", 5.0)
        w.add_float32("gemma2.final_logit_softcapping", 2.0)
        w.add_uint32("gemma2.attention.sliding_window", 64)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    tokens = list(tok["tokens"])
    if "unreachable" in extra:
        for i, text in UNREACHABLE_TOKENS.items():
            tokens[i] = text
    w.add_token_list(tokens)
    w.add_token_types(tok["types"])
    w.add_token_merges([m for m in tok["merges"] if "unreachable" not in extra or m not in UNREACHABLE_MERGES])
    w.add_bos_token_id(tok["bos"])
    w.add_eos_token_id(tok["eos"])
    w.add_add_bos_token(False)
    if chat_template is not None:
        w.add_chat_template(chat_template)

    def matrix(tname, rows, cols, scale=None):
        a = rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(scale or 1.0 / np.sqrt(cols))
        w.add_tensor(tname, gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                     raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    def vector(tname, n, center, spread):
        w.add_tensor(tname, (center + spread * rng.standard_normal(n)).astype(np.float32))

    # Gemma ties its head to the embedding: small rows keep the logits from mostly repeating the input.
    matrix("token_embd.weight", n_vocab, N_EMBD, scale=0.05 if "gemma" in extra else 1.0)
    if "rope_freqs" in extra:
        w.add_tensor("rope_freqs.weight", llama3_freq_factors(head_dim))
    if "longrope" in extra:
        short, long, _ = longrope_factors(head_dim)
        w.add_tensor("rope_factors_long.weight", long)
        w.add_tensor("rope_factors_short.weight", short)
    for il in range(N_LAYER):
        p = f"blk.{il}."
        vector(p + "attn_norm.weight", N_EMBD, 1.0, 0.1)
        # Q and K 3x larger than the rest: peaked attention, so that RoPE (its style, its frequency
        # factors) shows in the logits instead of averaging away.
        if "fused" in extra:
            qkv = rng.standard_normal((q_dim + 2 * kv_dim, N_EMBD)).astype(np.float32) / np.float32(np.sqrt(N_EMBD))
            qkv[: q_dim + kv_dim] *= np.float32(3.0)
            w.add_tensor(p + "attn_qkv.weight", gguf.quants.quantize(qkv, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            matrix(p + "attn_q.weight", q_dim, N_EMBD, scale=3.0 / np.sqrt(N_EMBD))
            matrix(p + "attn_k.weight", kv_dim, N_EMBD, scale=3.0 / np.sqrt(N_EMBD))
            matrix(p + "attn_v.weight", kv_dim, N_EMBD)
        if "qkv_bias" in extra:
            vector(p + "attn_q.bias", q_dim, 0.0, 0.5)
            vector(p + "attn_k.bias", kv_dim, 0.0, 0.5)
            vector(p + "attn_v.bias", kv_dim, 0.0, 0.5)
        if "qk_norm" in extra:
            vector(p + "attn_q_norm.weight", head_dim, 1.0, 0.2)
            vector(p + "attn_k_norm.weight", head_dim, 1.0, 0.2)
        matrix(p + "attn_output.weight", N_EMBD, q_dim)
        if "gemma" in extra:
            vector(p + "post_attention_norm.weight", N_EMBD, 1.0, 0.1)
        vector(p + "ffn_norm.weight", N_EMBD, 1.0, 0.1)
        if "fused" in extra:
            matrix(p + "ffn_up.weight", 2 * N_FF, N_EMBD)  # gate rows, then up rows
        else:
            matrix(p + "ffn_gate.weight", N_FF, N_EMBD)
            matrix(p + "ffn_up.weight", N_FF, N_EMBD)
        matrix(p + "ffn_down.weight", N_EMBD, N_FF)
        if "gemma" in extra:
            vector(p + "post_ffw_norm.weight", N_EMBD, 1.0, 0.1)
    vector("output_norm.weight", N_EMBD, 1.0, 0.1)
    # An own head (a head tied to random embeddings mostly predicts the last input token again, which
    # would make the greedy check trivial; tied heads are tested by SmolLM2).
    if "gemma" not in extra:
        matrix("output.weight", n_vocab, N_EMBD)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        return path, hashlib.sha256(f.read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=os.environ.get("AGENTKV_MODELS") or os.path.expanduser("~/.cache/agentkv/models"))
    ap.add_argument("--chat-templates", action="store_true", help="each file carries its family's chat template")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    tok = tokenizer_fields(args.models)
    templates = {}
    if args.chat_templates:
        import json
        with open(CHAT_GOLDENS, encoding="utf-8") as f:
            texts = json.load(f)["templates"]
        templates = {name: texts[t]["text"] for name, t in CHAT_TEMPLATES.items()}
    for name in ARCHS:
        path, digest = write(args.out_dir, name, tok, templates.get(name))
        print(f"{name} {path} {digest}")


if __name__ == "__main__":
    sys.exit(main())
