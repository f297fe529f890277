#!/usr/bin/env python3
"""llama.cpp's answers on the tiny architecture GGUFs (scripts/make_arch_ggufs.py), for
tests/model/arch_golden_test.cpp: the last-position logits of each prompt (raw little-endian f32) and
32 greedy tokens, with the file's sha256 so the test knows it regenerated the
same bytes.

Goldens are made only where the answer is not a coin toss: a prompt whose top two logits are within
MIN_MARGIN is refused, and the greedy run starts from the first candidate prompt whose 32 steps all
clear it (random weights make near-ties common).

Most files have one golden, at a context of 512. The LongRoPE file has two, one per factor set
(llama.cpp picks the long factors when the context per sequence exceeds the original context):
phi3-longrope-short at 256 (its original context) and phi3-longrope-long at 512; their JSON names the
file and the context ("file", "n_ctx"), which the test loads the model for.

Run with the reference build of scripts/build_llamacpp_reference.sh on PYTHONPATH / LLAMA_CPP_LIB_PATH:
  make_arch_goldens.py [GOLDEN...]   (writes tests/data/arch/<golden>.json and <golden>.<i>.f32; all by default)
"""
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LLAMA_CPP_COMMIT = "0c1e570"
# Token ids (SmolLM2's vocabulary), so the goldens check the forward pass, not a tokenizer.
PROMPTS = [
    [504, 3575, 282, 4649, 314],                      # "The capital of France is"
    [1, 28, 216, 33, 28, 216, 34, 28, 216, 35, 28],   # digits and commas
    list(range(1000, 1600, 7)),                       # 86 tokens: several prefill panels
    [(i * 7919) % 40000 + 103 for i in range(400)],   # 400 tokens: where RoPE's low frequencies turn
]
# At a context of 256 the 400-token prompt does not fit: a 248-token one takes its place.
PROMPTS_256 = PROMPTS[:3] + [[(i * 7919) % 40000 + 103 for i in range(248)]]
N_CTX = 512
# tiny file -> its goldens: (golden name, context, prompts).
GOLDENS = {"phi3-longrope": [("phi3-longrope-short", 256, PROMPTS_256), ("phi3-longrope-long", 512, PROMPTS)]}
N_GREEDY = 32
# Texts for the pre-tokenizer: contractions in any case, digit runs, whitespace runs before letters,
# digits, line breaks and the end, punctuation runs with line breaks, letters of several scripts;
# for llama-bpe also digit runs of 1 to 7 (split in threes), the words and digit runs its
# ignore_merges takes whole on the llama3 file (make_arch_ggufs.py's UNREACHABLE_MERGES and _TOKENS),
# and the spaces before punctuation and apostrophes that its clean_spaces removes when
# llama_detokenize turns the ids back into text; for gpt-4o (the phi3 file) letter runs split by case,
# contractions only after a word, and "/" after punctuation and line breaks.
TOKENIZER_TEXTS = [
    "I'M sure WE'LL see; they'Re here, it's HIS dog'S bone and you'd've",
    "12345 + 6.78 = 12351.78, 2024-12-01",
    "a   b\t\tc \n\n  x\r\n y  \n",
    "...!!\n\n--> (ok)?  ;;\n",
    "Привет, мир! 東京は日本の首都です。 naïve café Ωmega",
    "def f(x):\n    return x**2  # square\n\n\n",
    "emoji 👍🏽 and   trailing spaces   ",
    "  leading\u00a0nbsp and\u2003em space",
    "1 22 333 4444 55555 666666 7777777 x1234y 3.14159 ٣٤٥٦",
    "DON'T YOU'VE IT'S SHE'D THEY'RE I'LL We'Ve",
    "end.\n\nNext:\r\n- item;\n\n)\n  (\n",
    "x  \t\n\n   y 1  2\t\t3   \n",
    "Hello hello, Say hello! HelloHello hellos Hello\nhello",
    "Hi , there ! what ? yes . no ' quoted ' it 's I 'm we 're you 've don 't",
    "HelloWorld helloWorld ÉCOLE École McDonald's iPhone DON'T it's 'tis a/b/c x?\n/y",
]
# Random weights make near-ties: a prompt (or greedy step) whose top two logits are closer than this
# would make "the same top-1" a coin toss between two correct kernels, so the goldens refuse it.
MIN_MARGIN = 0.005


def margin(logits):
    top2 = np.sort(logits)[-2:]
    return float(top2[1] - top2[0])


def main():
    only = set(sys.argv[1:])
    out_dir = os.path.join(ROOT, "tests/data/arch")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        made = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/make_arch_ggufs.py"), tmp],
                              check=True, capture_output=True, text=True).stdout.split("\n")
        for line in filter(None, made):
            file_name, path, digest = line.split()
            for name, n_ctx, prompts in GOLDENS.get(file_name, [(file_name, N_CTX, PROMPTS)]):
                if not only or name in only:
                    write_golden(out_dir, name, file_name, path, digest, n_ctx, prompts)


def write_golden(out_dir, name, file_name, path, digest, n_ctx, prompts):
    m = Llama(path, n_ctx=n_ctx, n_batch=512, n_threads=2, verbose=False, flash_attn=False)
    meta = {"name": name, "sha256": digest, "llama_cpp_python": llama_cpp.__version__,
            "llama_cpp_commit": LLAMA_CPP_COMMIT, "n_vocab": m.n_vocab(), "prompts": []}
    if (file_name, n_ctx) != (name, N_CTX):
        meta["file"], meta["n_ctx"] = file_name, n_ctx
    for i, base in enumerate(prompts):
        # The prompt, or the first one-token extension of it whose top-1 is clear.
        for extra in [[]] + [[k] for k in range(100, 164)]:
            ids = base + extra
            m.reset()
            m.eval(ids)
            ptr = llama_cpp.llama_get_logits_ith(m._ctx.ctx, -1)
            logits = np.ctypeslib.as_array(ptr, shape=(m.n_vocab(),)).astype(np.float32).copy()
            if margin(logits) >= MIN_MARGIN:
                break
        else:
            sys.exit(f"{name} prompt {i}: every candidate's top-2 margin is below {MIN_MARGIN}")
        logits.astype("<f4").tofile(os.path.join(out_dir, f"{name}.{i}.f32"))
        entry = {"tokens": ids, "top1": int(np.argmax(logits))}
        meta["prompts"].append(entry)
        print(name, i, len(ids), entry["top1"], file=sys.stderr)
    vocab = llama_cpp.llama_model_get_vocab(m.model)

    def detokenize(ids):  # the library call (clean_spaces applies), not Llama.detokenize's pieces
        cap = 64 + 64 * len(ids)
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(vocab, (llama_cpp.llama_token * len(ids))(*ids), len(ids), buf, cap,
                                       False, False)
        assert n >= 0, n
        return buf.raw[:n].decode("utf-8")

    meta["tokenizer"] = []
    for t in TOKENIZER_TEXTS:
        ids = m.tokenize(t.encode("utf-8"), add_bos=False, special=False)
        meta["tokenizer"].append({"text": t, "ids": ids, "detok": detokenize(ids)})
    # 32 greedy tokens from the first candidate prompt whose whole path is free of near-ties.
    for extra in [[]] + [[k] for k in range(100, 164)]:
        ids = PROMPTS[0] + extra
        m.reset()
        m.eval(ids)
        greedy = []
        for _ in range(N_GREEDY):
            ptr = llama_cpp.llama_get_logits_ith(m._ctx.ctx, -1)
            cur = np.ctypeslib.as_array(ptr, shape=(m.n_vocab(),))
            if margin(cur) < MIN_MARGIN:
                break
            greedy.append(int(np.argmax(cur)))
            m.eval([greedy[-1]])
        if len(greedy) == N_GREEDY:
            meta["greedy"] = {"tokens": ids, "greedy": greedy}
            break
    else:
        sys.exit(f"{name}: every candidate's greedy path has a near-tie")
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
