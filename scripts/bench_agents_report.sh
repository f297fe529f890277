#!/usr/bin/env bash
# The issue-3 report: nocache vs prefix on generative-agents and debate, both models, same KV budget.
# Usage: scripts/bench_agents_report.sh [threads] [kv-mem]   (results in out/bench-agents/)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-0}
kv_mem=${2:-4G}
mkdir -p out/bench-agents
for model in smollm2 gemma3; do
  for workload in generative-agents debate; do
    base=out/bench-agents/${model}-${workload}
    ./build/agentkv bench-agents -m "$model" --workload "$workload" --mode nocache,prefix -t "$threads" \
      --kv-mem "$kv_mem" --json "$base.json" --plot "$base.png" | tee "$base.txt"
  done
done
