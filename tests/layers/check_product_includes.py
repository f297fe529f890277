#!/usr/bin/env python3
"""Fails if any file under src/ includes a header of the lab (lab/) or of the old bench/ tree, by
path or by bare file name: the product never depends on the lab (../shared/DESIGN.md).
usage: check_product_includes.py SOURCE_DIR"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
lab_headers = {p.name for p in (root / "lab").rglob("*.h")}
product_headers = {p.name for p in (root / "src").rglob("*.h")}
include = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')
bad = []
for f in sorted((root / "src").rglob("*")):
    if f.suffix not in (".h", ".cpp"):
        continue
    for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
        m = include.match(line)
        if not m:
            continue
        inc = m.group(1)
        name = inc.rsplit("/", 1)[-1]
        if inc.startswith(("lab/", "bench/")) or ("/" not in inc and name in lab_headers and name not in product_headers):
            bad.append(f"{f.relative_to(root)}:{n}: includes {inc}")
for b in bad:
    print(b)
print(f"{len(bad)} product includes of the lab")
sys.exit(1 if bad else 0)
