#!/usr/bin/env bash
# llama.cpp's perplexity on tests/data/perplexity/kjv_genesis.txt at --ctx 512 for both models.
# Needs the reference build of scripts/build_llamacpp_reference.sh (LLAMACPP_BIN = its build/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${LLAMACPP_BIN:?set LLAMACPP_BIN to the reference build/bin}
MODELS=${AGENTKV_MODELS:-$HOME/.cache/agentkv/models}
out=tests/data/perplexity/goldens.json
{
  echo '{"llama_cpp_commit": "0c1e570", "llama_cpp_python": "0.3.36", "text": "kjv_genesis.txt", "ctx": 512, "ppl": {'
  sep=""
  for pair in smollm2:SmolLM2-135M-Instruct.Q4_1.gguf gemma3:gemma-3-270m-q4_k_m.gguf; do
    alias=${pair%%:*}; file=${pair#*:}
    ppl=$(LD_LIBRARY_PATH=$BIN "$BIN/llama-perplexity" -m "$MODELS/$file" -f tests/data/perplexity/kjv_genesis.txt \
          -c 512 -t "$(nproc)" 2>&1 | sed -nE 's/.*Final estimate: PPL = ([0-9.]+).*/\1/p')
    echo "$sep \"$alias\": $ppl"
    sep=","
  done
  echo '}}'
} > "$out"
cat "$out"
