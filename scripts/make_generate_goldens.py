#!/usr/bin/env python3
"""Greedy continuations from llama.cpp (reference build, see build_llamacpp_reference.sh) for the
CLI generate tests: tests/data/generate/goldens.json."""
import json
import os

from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS_DIR = os.environ.get("AGENTKV_MODELS") or os.path.expanduser("~/.cache/agentkv/models")
CASES = [
    ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", True, "What is the capital of France?"),
    ("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", False, "The capital of France is"),
    ("gemma3", "gemma-3-270m-q4_k_m.gguf", False, "The capital of France is"),
    ("gemma3", "gemma-3-270m-q4_k_m.gguf", True, "What is the capital of France?"),
]
N = 24
EOG = {"smollm2": (0, 2, 4), "gemma3": (1, 106, 212)}  # llama.cpp's end-of-generation ids
out = {"llama_cpp_commit": "0c1e570", "llama_cpp_python": "0.3.36", "n_predict": N, "cases": []}
for alias, fname, chat, prompt in CASES:
    m = Llama(os.path.join(MODELS_DIR, fname), n_ctx=512, verbose=False)
    if chat:
        if alias == "smollm2":
            text = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                    f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n")
        else:
            text = f"<start_of_turn>user\n{prompt}<end_of_turn>\n<start_of_turn>model\n"
    else:
        text = prompt
    ids = m.tokenize(text.encode(), add_bos=(alias == "gemma3"), special=chat)
    gen = []
    for t in m.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0):
        if t in EOG[alias]:
            break
        gen.append(t)
        if len(gen) >= N:
            break
    out["cases"].append({"model": alias, "chat": chat, "prompt": prompt, "prompt_tokens": ids, "tokens": gen,
                         "text": m.detokenize(gen).decode("utf-8", "replace")})
    print(alias, chat, repr(out["cases"][-1]["text"]))
with open(os.path.join(ROOT, "tests/data/generate/goldens.json"), "w") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
