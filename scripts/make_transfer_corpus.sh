#!/usr/bin/env bash
# Writes a KV-transfer calibration corpus for `agentkv fit-transfer --corpus FILE`: chapters of the
# King James Version from Debian's bible-kjv package (public domain), one passage per chapter,
# verse references stripped, passages separated by blank lines. Nothing is committed: the text
# comes from the installed package each time.
#   scripts/make_transfer_corpus.sh [--verses] OUT [BOOK:FIRST-LAST ...]
# --verses keeps one verse per line with its reference ("Acts1:3 To whom also ..."), the input of
# `agentkv transfer-retrieval` (its default --task verses; --task passkey takes the plain output as filler).
# The default (Exodus, Leviticus, Numbers) is the fitting split; evaluation text (the tests, the
# quality report) comes from other books (John), so no evaluation verse is seen in fitting.
set -euo pipefail
command -v bible >/dev/null || { echo "needs Debian package bible-kjv (scripts/setup.sh installs it)" >&2; exit 1; }
verses=0
[[ "${1:-}" == "--verses" ]] && { verses=1; shift; }
out=${1:?usage: make_transfer_corpus.sh [--verses] OUT [BOOK:FIRST-LAST ...]}
shift
ranges=("$@")
((${#ranges[@]})) || ranges=(ex:1-40 le:1-27 nu:1-36)
: > "$out"
for r in "${ranges[@]}"; do
  book=${r%%:*}; span=${r#*:}; first=${span%-*}; last=${span#*-}
  for ch in $(seq "$first" "$last"); do
    lines=$(bible -f "${book}${ch}:1-${book}${ch}:999" 2>/dev/null | grep -E '^[^ ]+[0-9]+:[0-9]+ ')
    if ((verses)); then
      printf '%s\n' "$lines" >> "$out"
    else
      sed -E 's/^[^ ]+ //' <<< "$lines" | paste -sd' ' >> "$out"
    fi
    echo >> "$out"
  done
done
wc -c "$out" >&2
