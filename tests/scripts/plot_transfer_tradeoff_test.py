#!/usr/bin/env python3
# Tests scripts/plot_transfer_tradeoff.py on committed CSV files of a real run (tests/data/
# transfer_tradeoff/: transfer-quality and transfer-retrieval --task passkey, SmolLM2 -> Gemma 3 and
# back, the BENCHMARKS.md "Hybrid by deviation" figures): the PNG decodes, has the two panels' size,
# and is not blank; the series group modes by method (transfer, last, dev, dev+last), the pure
# transfer joining each family; `--x wall` plots the measured saving of labelled files (the hybrid by
# rarity's 1k/2k/4k runs, tests/data/transfer_rarity/fast_projection/); a CSV missing a column or empty
# is a one-line error and exit 1.
# Runs under pytest or alone (prints "plot_transfer_tradeoff test: ok").
import importlib.util
import os
import subprocess
import sys
import tempfile

import matplotlib.image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "plot_transfer_tradeoff.py")
DATA = os.path.join(ROOT, "tests", "data", "transfer_tradeoff")
QUALITY = [os.path.join(DATA, f) for f in ("quality_s2g.csv", "quality_g2s.csv")]
RECALL = [os.path.join(DATA, f) for f in ("passkey_s2g.csv", "passkey_g2s.csv")]


def load_module():
    spec = importlib.util.spec_from_file_location("plot_transfer_tradeoff", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def test_draws_both_panels():
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "tradeoff.png")
        r = run(out, "--quality", *QUALITY, "--recall", *RECALL)
        assert r.returncode == 0, r.stderr
        img = matplotlib.image.imread(out)
        assert img.shape[0] == 550 and img.shape[1] == 1500, img.shape
        assert img[..., :3].std() > 0.05, "blank image"
        only = os.path.join(d, "quality.png")
        assert run(only, "--quality", *QUALITY).returncode == 0
        assert matplotlib.image.imread(only).shape[1] == 750


def test_wall_clock_axis_with_labels():
    fast = os.path.join(ROOT, "tests", "data", "transfer_rarity", "fast_projection")
    files = [f"{size}={os.path.join(fast, f'quality_{size}_{d}.csv')}" for size in ("1k", "2k", "4k") for d in ("g2s", "s2g")]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "wall.png")
        r = run(out, "--x", "wall", "--quality", *files)
        assert r.returncode == 0, r.stderr
        assert matplotlib.image.imread(out).shape[1] == 750
        r = run(out, "--x", "wall", "--quality", *files, "--recall", *RECALL)
        assert r.returncode == 1 and "value panel only" in r.stderr, r.stderr
    mod = load_module()
    rows = [{"sender": "a", "receiver": "b", "mode": "rare:2%", "kept": "0.9", "native_work": "0.2",
             "ttft_saving": "0.71", "label": "1k"}]
    lines = mod.series(rows, lambda r: float(r["kept"]), mod.saving_of("wall"))
    assert lines == {("a → b, 1k", "rare"): [(0.71, 0.9, "1k")]}, lines


def test_series_by_family():
    mod = load_module()
    assert mod.family("transfer") == "transfer"
    assert mod.family("last:32") == "last" and mod.family("64") == "last"
    assert mod.family("dev:0.1") == "dev" and mod.family("dev:0.1+last:32") == "dev+last"
    rows = [
        {"sender": "a", "receiver": "b", "mode": "transfer", "kept": "0.5", "native_work": "0.001"},
        {"sender": "a", "receiver": "b", "mode": "dev:0.2", "kept": "0.9", "native_work": "0.3"},
        {"sender": "a", "receiver": "b", "mode": "dev:0.1", "kept": "0.8", "native_work": "0.2"},
    ]
    lines = mod.series(rows, lambda r: float(r["kept"]))
    assert list(lines) == [("a → b", "dev")], lines
    pts = lines[("a → b", "dev")]
    assert [p[2] for p in pts] == ["dev:0.2", "dev:0.1", "transfer"], pts  # by saving, ascending


def test_refuses_broken_csv():
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "bad.csv")
        with open(bad, "w") as f:
            f.write("sender,receiver,mode\na,b,transfer\n")
        r = run(os.path.join(d, "x.png"), "--quality", bad)
        assert r.returncode == 1 and "missing columns" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        empty = os.path.join(d, "empty.csv")
        open(empty, "w").close()
        r = run(os.path.join(d, "x.png"), "--quality", empty)
        assert r.returncode == 1 and "no rows" in r.stderr, r.stderr


if __name__ == "__main__":
    test_draws_both_panels()
    test_wall_clock_axis_with_labels()
    test_series_by_family()
    test_refuses_broken_csv()
    print("plot_transfer_tradeoff test: ok")
