#!/usr/bin/env bash
# Makes tests/data/perplexity/kjv_genesis.txt: Genesis 1-12 of the King James Version (public domain),
# from Debian's bible-kjv package, verse numbers stripped, one paragraph per chapter.
set -euo pipefail
command -v bible >/dev/null || { echo "needs Debian package bible-kjv (apt-get install bible-kjv)" >&2; exit 1; }
out="$(dirname "$0")/../tests/data/perplexity/kjv_genesis.txt"
: > "$out"
for ch in $(seq 1 12); do
  bible -f "gen${ch}:1-gen${ch}:99" 2>/dev/null | grep -E "^Ge${ch}:" | sed -E 's/^Ge[0-9]+:[0-9]+ //' | paste -sd' ' >> "$out"
  echo >> "$out"
done
wc -w "$out"
