#!/usr/bin/env python3
"""Writes a KV-transfer calibration corpus from the World English Bible for `agentkv fit-transfer --corpus
FILE` (issue 19, deliverable 1: "fit on more public text"): one passage per chapter, verse references and
markup stripped, passages separated by blank lines, as scripts/make_transfer_corpus.sh writes the KJV. The
WEB (with the deuterocanonical books) is public domain and comes from Debian's sword-text-web package,
read with its `diatheke` tool; nothing is committed.

The held-out books of the transfer benchmarks (John, Luke, Acts) are left out by default, so no evaluation
text is fitted in either translation; --exclude names others (SWORD's English book names, comma-separated).

    python3 scripts/make_web_corpus.py OUT [--exclude John,Luke,Acts] [--passage-bytes 4000]

A chapter longer than --passage-bytes is cut at verse ends into passages no longer than that (fit with
`fit-transfer --max-bytes` at least as large, so nothing is truncated).

The module's OSIS text marks words as <w>...</w> and in a few thousand places writes two words with no
space between their tags ("born<w>Son</w>", "God</w><w>created"); a space is put there, which is what
the module's own plain rendering loses. Its plain rendering also repeats section headings after verses,
so the OSIS form is parsed here instead.
"""
import argparse
import re
import shutil
import subprocess
import sys

MODULE = "engWEB2015eb"
# "Book C:V: text", the book as SWORD names it ("II Samuel", "Song of Solomon", "Revelation of John"). After a
# heading (Psalm 119's letters, "A praise psalm by David.") diatheke prefixes the heading's text and two spaces
# to the following lines, so the key is searched for, not anchored.
VERSE = re.compile(r"(?:^|  )(?P<book>(?:(?:I|II|III|IV) )?[A-Z][a-z]+(?: (?:of )?[A-Z][a-z]+)?) "
                   r"(?P<ch>\d+):(?P<v>\d+): ?(?P<text>.*)$")


def clean(osis):
    text = re.sub(r"<title\b[^>]*>.*?</title>", " ", osis)
    text = re.sub(r"<note\b[^>]*>.*?</note>", " ", text)
    text = re.sub(r"</w>(?=<w\b)", "</w> ", text)           # two tagged words glued together
    text = re.sub(r"(?<=[A-Za-z])(?=<w\b)", " ", text)        # an untagged word glued to a tagged one
    text = re.sub(r"<[^>]*>", " ", text)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"([“‘(]) ", r"\1", text)
    return re.sub(r" ([,.;:!?’”)])", r"\1", text).strip()


def pieces(verses, limit):
    """A chapter's verses joined, cut at verse ends into the fewest pieces of at most `limit` bytes (a
    longer single verse is a piece of its own), so fit-transfer's own cut (--max-bytes) loses nothing."""
    whole = " ".join(verses)
    n = -(-len(whole.encode()) // limit)
    if n <= 1:
        return [whole]
    target, out, cur = len(whole.encode()) / n, [], []
    for v in verses:
        size = len(" ".join(cur + [v]).encode())
        if cur and (size > limit or len(" ".join(cur).encode()) >= target):
            out.append(" ".join(cur))
            cur = []
        cur.append(v)
    out.append(" ".join(cur))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--exclude", default="John,Luke,Acts",
                    help="books left out, comma-separated (default: the transfer benchmarks' held-out books)")
    ap.add_argument("--passage-bytes", type=int, default=4000,
                    help="longest passage; longer chapters are cut at verse ends (default 4000)")
    args = ap.parse_args()
    if args.passage_bytes < 200:
        sys.exit("--passage-bytes must be at least 200")
    if not shutil.which("diatheke"):
        sys.exit("needs Debian packages diatheke and sword-text-web (scripts/apt_install.sh diatheke sword-text-web)")
    excluded = {b.strip() for b in args.exclude.split(",") if b.strip()}
    run = subprocess.run(["diatheke", "-b", MODULE, "-f", "OSIS", "-k", "Genesis 1:1 - Revelation of John 22:21"],
                         capture_output=True, text=True)
    if run.returncode != 0 or "Revelation of John 22:21:" not in run.stdout:
        sys.exit(f"diatheke could not read the {MODULE} module (is sword-text-web installed?): {run.stderr.strip()}")
    chapters, order, module_books = {}, [], set()
    for line in run.stdout.splitlines():
        m = VERSE.search(line)
        if not m:
            continue
        key = (m["book"], int(m["ch"]))
        module_books.add(m["book"])
        if m["book"] in excluded:
            continue
        if key not in chapters:
            chapters[key] = []
            order.append(key)
        verse = clean(m["text"])
        # The module appends its glossary of rare words to the last verse of Revelation: not Bible text.
        verse = verse.split(" The following words used in the World English Bible")[0]
        if verse:
            chapters[key].append(verse)
    seen_books = {k[0] for k in order}
    missing = excluded - module_books
    if missing:
        sys.exit(f"no book named {', '.join(sorted(missing))} in {MODULE}; its books: {', '.join(sorted(module_books))}")
    passages = [p for key in order if chapters[key] for p in pieces(chapters[key], args.passage_bytes)]
    with open(args.out, "w", encoding="utf-8") as f:
        for p in passages:
            f.write(p + "\n\n")
    total = sum(len(p.encode()) for p in passages)
    print(f"{args.out}: {len(order)} chapters of {len(seen_books)} books in {len(passages)} passages, {total} bytes",
          file=sys.stderr)


if __name__ == "__main__":
    main()
