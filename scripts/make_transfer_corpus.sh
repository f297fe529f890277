#!/usr/bin/env bash
# Writes a KV-transfer calibration corpus for `agentkv fit-transfer --corpus FILE`: chapters of the
# King James Version from Debian's bible-kjv package (public domain), one passage per chapter,
# verse references stripped, passages separated by blank lines. Nothing is committed: the text
# comes from the installed package each time.
#   scripts/make_transfer_corpus.sh OUT [BOOK:FIRST-LAST ...]
# The default (Exodus, Leviticus, Numbers) is the fitting split; evaluation text (the tests, the
# quality report) comes from other books (John), so no evaluation verse is seen in fitting.
set -euo pipefail
command -v bible >/dev/null || { echo "needs Debian package bible-kjv (scripts/setup.sh installs it)" >&2; exit 1; }
out=${1:?usage: make_transfer_corpus.sh OUT [BOOK:FIRST-LAST ...]}
shift
ranges=("$@")
((${#ranges[@]})) || ranges=(ex:1-40 le:1-27 nu:1-36)
: > "$out"
for r in "${ranges[@]}"; do
  book=${r%%:*}; span=${r#*:}; first=${span%-*}; last=${span#*-}
  for ch in $(seq "$first" "$last"); do
    bible -f "${book}${ch}:1-${book}${ch}:999" 2>/dev/null | grep -E '^[^ ]+[0-9]+:[0-9]+ ' | sed -E 's/^[^ ]+ //' | paste -sd' ' >> "$out"
    echo >> "$out"
  done
done
wc -c "$out" >&2
