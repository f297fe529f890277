#!/usr/bin/env python3
"""Next-token distributions of agentkv against llama.cpp's on the same GGUF and the same token ids.

For each model: the held-out text (by default tests/data/perplexity/kjv_genesis.txt from character
15000 on, past everything the logit goldens use) is tokenized once by llama.cpp, cut into chunks of
--ctx tokens (each a fresh context, starting with BOS when the model adds one, as llama-perplexity
does), and every position of every chunk is scored: llama.cpp's logits (reference build of
scripts/build_llamacpp_reference.sh, logits_all, one ubatch per chunk) against `agentkv logits` on the
same ids. Prints mean / max KL(llama.cpp || agentkv) in nats and top-1 agreement; --json writes them.
--prompt additionally shows both top-3 log-probabilities at the last position of one prompt.
--floor also scores llama.cpp against itself with flash attention on (the same model and ids, only
the attention's summation order and precision changed): the spread rounding alone produces.

  eval "$(bash scripts/build_llamacpp_reference.sh | tail -1)"
  python3 scripts/numerics_vs_llamacpp.py --positions 2048
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
MODELS_DIR = os.environ.get("AGENTKV_MODELS") or os.path.expanduser("~/.cache/agentkv/models")
MODELS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}


def log_softmax(x):
    x = x.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def llama_logits(m, ids):
    """All positions' logits of one fresh context, as an (n, n_vocab) float32 copy."""
    m.reset()
    m.eval(ids)
    ptr = llama_cpp.llama_get_logits(m._ctx.ctx)
    return np.ctypeslib.as_array(ptr, shape=(len(ids), m.n_vocab())).astype(np.float32).copy()


def agentkv_logits(binary, alias, seqs, n_vocab, threads):
    """`agentkv logits` on the sequences; a memory map of (sum of lengths, n_vocab) float32."""
    tmp = tempfile.mkdtemp(prefix="numerics_")
    tok_path, out_path = os.path.join(tmp, "ids.txt"), os.path.join(tmp, "logits.f32")
    with open(tok_path, "w") as f:
        for s in seqs:
            f.write(" ".join(map(str, s)) + "\n")
    subprocess.run([binary, "logits", "-m", alias, "--tokens", tok_path, "-o", out_path, "-t", str(threads)],
                   check=True)
    arr = np.fromfile(out_path, dtype="<f4").reshape(-1, n_vocab)
    os.remove(out_path)
    os.remove(tok_path)
    os.rmdir(tmp)
    return arr


def compare(ref, got, rows=64):
    """Per-position KL(ref || got) and whether the argmax agrees."""
    kls, agree = [], []
    for i in range(0, len(ref), rows):
        lp, lq = log_softmax(ref[i:i + rows]), log_softmax(got[i:i + rows])
        kls.append((np.exp(lp) * (lp - lq)).sum(axis=-1))
        agree.append(ref[i:i + rows].argmax(axis=-1) == got[i:i + rows].argmax(axis=-1))
    return np.concatenate(kls), np.concatenate(agree)


def summarize(alias, what, kls, agree):
    kl, ag = np.concatenate(kls), np.concatenate(agree)
    r = {"positions": int(len(kl)), "mean_kl": float(kl.mean()), "p99_kl": float(np.quantile(kl, 0.99)),
         "max_kl": float(kl.max()), "top1_agreement": float(ag.mean())}
    print(f"{alias} {what}: {r['positions']} positions  mean KL {r['mean_kl']:.5f}  p99 {r['p99_kl']:.5f}  "
          f"max {r['max_kl']:.4f}  top-1 agreement {100 * r['top1_agreement']:.2f}%")
    return r


def show_prompt(m, binary, alias, prompt, add_bos, threads):
    ids = m.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=False)
    ref = llama_logits(m, ids)[-1:]
    got = agentkv_logits(binary, alias, [ids], m.n_vocab(), threads)[-1:]
    for name, x in (("llama.cpp", ref), ("agentkv", got)):
        lp = log_softmax(x)[0]
        top = np.argsort(-lp)[:3]
        print(f"  {name:9s} " + "  ".join(f"{m.detokenize([int(t)]).decode('utf-8', 'replace')!r} {lp[t]:.3f}"
                                          for t in top), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--text", default=os.path.join(ROOT, "tests/data/perplexity/kjv_genesis.txt"))
    ap.add_argument("--text-from", type=int, default=15000, help="first character of --text used")
    ap.add_argument("--positions", type=int, default=2048, help="positions scored per model (at least)")
    ap.add_argument("--ctx", type=int, default=512, help="tokens per chunk (one fresh context each)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--agentkv", default=os.path.join(ROOT, "build/agentkv"))
    ap.add_argument("--prompt", default="In 1969, the first humans to walk on the Moon were")
    ap.add_argument("--floor", action="store_true", help="also llama.cpp against llama.cpp with flash attention")
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    text = open(a.text, encoding="utf-8").read()[a.text_from:]
    results = {"date": time.strftime("%Y-%m-%d"), "llama_cpp_python": llama_cpp.__version__, "ctx": a.ctx,
               "text": os.path.relpath(a.text, ROOT), "text_from": a.text_from, "models": {}}
    for alias in a.models.split(","):
        m = Llama(os.path.join(MODELS_DIR, MODELS[alias]), n_ctx=a.ctx, n_batch=a.ctx, n_ubatch=a.ctx,
                  n_threads=a.threads, logits_all=True, verbose=False)
        add_bos = bool(m._model.add_bos_token())
        ids = m.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        body = a.ctx - 1 if add_bos else a.ctx
        n_chunks = -(-a.positions // a.ctx)
        if len(ids) < n_chunks * body:
            sys.exit(f"{alias}: text has {len(ids)} tokens, {n_chunks} chunks of {body} need more")
        seqs = [([m.token_bos()] if add_bos else []) + ids[c * body:(c + 1) * body] for c in range(n_chunks)]
        got = agentkv_logits(a.agentkv, alias, seqs, m.n_vocab(), a.threads)
        fa = None
        if a.floor:
            fa = Llama(os.path.join(MODELS_DIR, MODELS[alias]), n_ctx=a.ctx, n_batch=a.ctx, n_ubatch=a.ctx,
                       n_threads=a.threads, logits_all=True, flash_attn=True, verbose=False)
        kls, agree, fa_kls, fa_agree = [], [], [], []
        for c, s in enumerate(seqs):
            ref = llama_logits(m, s)
            k, g = compare(ref, got[c * a.ctx:(c + 1) * a.ctx])
            kls.append(k)
            agree.append(g)
            if fa:
                k, g = compare(ref, llama_logits(fa, s))
                fa_kls.append(k)
                fa_agree.append(g)
        results["models"][alias] = summarize(alias, "agentkv", kls, agree)
        if fa:
            results["models"][alias + "_llamacpp_flash_attn"] = summarize(alias, "llama.cpp flash-attn", fa_kls, fa_agree)
            del fa
        if a.prompt:
            show_prompt(m, a.agentkv, alias, a.prompt, add_bos, a.threads)
        del m
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
