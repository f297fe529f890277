#!/usr/bin/env python3
"""Writes a more varied KV-transfer calibration corpus for `agentkv fit-transfer --corpus FILE` (issue 19,
deliverable 1: "fit on more and more varied public text"): passages of the King James Version (Exodus,
Leviticus, Numbers, from scripts/make_transfer_corpus.sh: the fitting split, John stays held out)
alternating with passages of Debian's `fortunes` package (quotations, literature, science, computers,
people, wisdom...: modern English with names, numbers and dialogue, public domain or freely
redistributable as the package states). Fortunes are joined in file order into passages of about
--passage-bytes, their internal blank lines and tab indents collapsed, so fit-transfer's blank-line
passage split sees one passage each. Nothing is committed: the text comes from the installed packages.

    python3 scripts/make_varied_corpus.py OUT [--passage-bytes 2000]
"""
import argparse
import os
import re
import subprocess
import sys

FORTUNES = "/usr/share/games/fortunes"
# ASCII art and one-line definitions are not running text.
SKIP = {"ascii-art", "art", "definitions"}


def fortune_passages(limit):
    if not os.path.isdir(FORTUNES):
        sys.exit(f"needs Debian package fortunes ({FORTUNES} is missing; scripts/apt_install.sh fortunes)")
    entries = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or name in SKIP or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                text = re.sub(r"[ \t]+", " ", entry.replace("\t", " "))
                text = re.sub(r"\n\s*\n+", "\n", text).strip().strip("%").strip()
                if len(text) > 40:
                    entries.append(text)
    passages, cur = [], ""
    for e in entries:
        if cur and len(cur) + len(e) + 1 > limit:
            passages.append(cur)
            cur = ""
        cur = e if not cur else cur + "\n" + e
    if cur:
        passages.append(cur)
    return passages


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--passage-bytes", type=int, default=2000)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    kjv_path = a.out + ".kjv"
    subprocess.run(["bash", os.path.join(here, "make_transfer_corpus.sh"), kjv_path], check=True)
    with open(kjv_path, encoding="utf-8") as f:
        kjv = [p.strip() for p in f.read().split("\n\n") if p.strip()]
    os.remove(kjv_path)
    fortunes = fortune_passages(a.passage_bytes)
    out = []
    for i in range(max(len(kjv), len(fortunes))):
        for src in (kjv, fortunes):
            if i < len(src):
                out.append(src[i])
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n\n".join(out) + "\n")
    print(f"{a.out}: {len(kjv)} KJV passages and {len(fortunes)} fortunes passages, alternating", file=sys.stderr)


if __name__ == "__main__":
    main()
