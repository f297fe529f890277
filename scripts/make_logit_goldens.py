#!/usr/bin/env python3
"""Last-position logits from llama.cpp for the logit tests (tests/model/logits_golden_test.cpp).

Run with the reference build of scripts/build_llamacpp_reference.sh on PYTHONPATH / LLAMA_CPP_LIB_PATH.
Writes tests/data/logits/<model>.json (prompts, token ids, llama.cpp version) and <model>.<i>.f32
(raw little-endian float32 logits of the last position). The test feeds the same token ids, so it
checks the forward pass independently of the tokenizer.
"""
import json
import os
import sys

import numpy as np
import llama_cpp
from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS_DIR = os.environ.get("AGENTKV_MODELS") or os.path.expanduser("~/.cache/agentkv/models")
MODELS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf", "gemma3": "gemma-3-270m-q4_k_m.gguf"}
LLAMA_CPP_COMMIT = "0c1e570"

kjv = open(os.path.join(ROOT, "tests/data/perplexity/kjv_genesis.txt"), encoding="utf-8").read()
PROMPTS = [
    ("short", "The capital of France is"),
    ("digits", "1, 2, 3, 4, 5, 6, 7, 8,"),
    ("code", "def fibonacci(n):\n    if n < 2:\n        return n\n    return"),
    ("multilingual", "Bonjour, je m'appelle Marie. 東京は日本の首都です。 Привет, мир!"),
    ("chat", None),  # filled per model with its chat format
    ("medium_600", kjv[:2600]),
    ("long_1k", kjv[3000:7600]),
    ("long_1k2", kjv[9000:14500]),
]
CHAT = {
    "smollm2": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
               "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
    "gemma3": "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
}


def main():
    out_dir = os.path.join(ROOT, "tests/data/logits")
    os.makedirs(out_dir, exist_ok=True)
    for alias, fname in MODELS.items():
        m = Llama(os.path.join(MODELS_DIR, fname), n_ctx=4096, n_batch=512, n_threads=2, verbose=False)
        add_bos = m._model.add_bos_token() if hasattr(m._model, "add_bos_token") else alias == "gemma3"
        meta = {"model": alias, "file": fname, "llama_cpp_python": llama_cpp.__version__,
                "llama_cpp_commit": LLAMA_CPP_COMMIT, "n_vocab": m.n_vocab(), "prompts": []}
        for i, (name, text) in enumerate(PROMPTS):
            if text is None:
                text = CHAT[alias]
            ids = m.tokenize(text.encode("utf-8"), add_bos=bool(add_bos), special=True)
            m.reset()
            m.eval(ids)
            ptr = llama_cpp.llama_get_logits_ith(m._ctx.ctx, -1)
            logits = np.ctypeslib.as_array(ptr, shape=(m.n_vocab(),)).astype(np.float32).copy()
            logits.astype("<f4").tofile(os.path.join(out_dir, f"{alias}.{i}.f32"))
            top = np.argsort(-logits)[:10].tolist()
            meta["prompts"].append({"name": name, "tokens": ids, "n_tokens": len(ids), "top10": top})
            print(alias, name, len(ids), top[:3], file=sys.stderr)
        with open(os.path.join(out_dir, f"{alias}.json"), "w") as f:
            json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
