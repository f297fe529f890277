#!/usr/bin/env python3
# Tests scripts/plot_bench_agents.py on a committed bench-agents report (tests/data/bench_agents/
# debate_report.json: a real run of 4 debate agents over 3 rounds in nocache, prefix and tokendance
# at R = 0 and 0.5, replies shortened): the PNG decodes at the size the layout gives, holds the panels
# the report calls for (the six per-round panels; the four against R only with two or more ratios; the
# find-fit panel only when a search ran), and
# every panel has something drawn in it. A broken report is a one-line error and exit 1.
# Runs under pytest or alone (python3 plot_bench_agents_test.py, prints "plot_bench_agents test: ok").
import copy
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import matplotlib.image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "plot_bench_agents.py")
REPORT = os.path.join(ROOT, "tests", "data", "bench_agents", "debate_report.json")

PER_ROUND = [
    "Prefill tokens computed per agent",
    "Round latency (submit to last token)",
    "Time to first token, median (p50)",
    "KV cache per agent, all contexts resident",
    "Prefix-cache hit rate",
    "Agents whose contexts fit the KV budget",
]
AGAINST_R = [
    "KL(exact || shared) of the next token vs R",
    "Agreement with the exact context vs R",
    "Perplexity of the answers vs R",
    "Prefill time per agent, all rounds, vs R",
]


def load_layout():
    spec = importlib.util.spec_from_file_location("plot_bench_agents", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def draw(report, tmp):
    path = os.path.join(tmp, "report.json")
    with open(path, "w") as f:
        json.dump(report, f)
    png = os.path.join(tmp, "out.png")
    p = subprocess.run([sys.executable, SCRIPT, path, png, "--list-panels"], capture_output=True, text=True)
    return p, png


def check_chart(report, expected_titles):
    layout = load_layout()
    with tempfile.TemporaryDirectory() as tmp:
        p, png = draw(report, tmp)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == expected_titles, p.stdout
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        img = matplotlib.image.imread(png)
    cols = min(layout.COLUMNS, len(expected_titles))
    rows = math.ceil(len(expected_titles) / cols)
    assert img.shape[:2] == (layout.HEADER_HEIGHT + rows * layout.PANEL_HEIGHT, cols * layout.PANEL_WIDTH), img.shape
    # Each panel's plot area holds more than the background: its bars or lines were drawn.
    for i, title in enumerate(expected_titles):
        row, col = divmod(i, cols)
        top = layout.HEADER_HEIGHT + row * layout.PANEL_HEIGHT + layout.PLOT_TOP
        left = col * layout.PANEL_WIDTH + layout.PLOT_LEFT
        area = img[top + 5:top + layout.PANEL_HEIGHT - layout.PLOT_TOP - layout.PLOT_BOTTOM - 5,
                   left + 5:left + layout.PANEL_WIDTH - layout.PLOT_LEFT - layout.PLOT_RIGHT - 5, :3]
        coloured = (area.max(axis=2) - area.min(axis=2) > 0.2).mean()
        assert coloured > 0.003, f"panel {title!r}: {coloured:.4f} of its plot area is coloured"


def load_report():
    with open(REPORT) as f:
        return json.load(f)


def test_report_is_what_bench_agents_writes():
    r = load_report()
    assert [m["mode"] for m in r["modes"]] == ["nocache", "prefix", "td@0", "td@0.5"]
    assert all(len(m["rounds"]) == 3 for m in r["modes"])


def test_all_panels_with_two_ratios():
    check_chart(load_report(), PER_ROUND + AGAINST_R)


def test_per_round_panels_only_with_one_ratio():
    r = load_report()
    r["modes"] = [m for m in r["modes"] if m["mode"] != "td@0.5"]
    check_chart(r, PER_ROUND)


def test_two_modes_without_tokendance():
    r = load_report()
    r["modes"] = [m for m in r["modes"] if not m["mode"].startswith("td@")]
    check_chart(r, PER_ROUND)


def test_sampled_mode_is_labelled_and_left_out_where_agents_count():
    r = load_report()
    r["modes"] = [m for m in r["modes"] if m["mode"] in ("prefix", "td@0")]
    prefix = r["modes"][0]
    prefix["sampled_agents"] = [1, 3]
    prefix["replayed_from"] = "td@0"
    for x in prefix["rounds"]:
        x["agents"] = 2
    check_chart(r, PER_ROUND)
    layout = load_layout()
    assert layout.mode_label(prefix, 4) == "prefix: prefix cache (2 of 4 agents sampled)"
    # Per agent: the sampled mode's tokens are divided by the agents it ran, not by the town's.
    x = prefix["rounds"][0]
    assert layout.round_value(x, "prefill_tokens_computed", 1, "per agent", "t") == x["prefill_tokens_computed"] / 2


def test_diff_formats_of_one_ratio_are_not_a_ratio_sweep():
    # --diff-format f16,int4 names the modes td@R and td@R/int4: one R, so no panels against R.
    r = load_report()
    r["modes"] = [m for m in r["modes"] if m["mode"] in ("prefix", "td@0.5")]
    int4 = copy.deepcopy(r["modes"][1])
    int4["mode"] = "td@0.5/int4"
    r["modes"].append(int4)
    check_chart(r, PER_ROUND)
    assert load_layout().mode_label(int4, 4) == "td@0.5/int4: tokendance, recompute R=0.5, int4 diff rows"
    # Two ratios in one format still sweep R.
    r = load_report()
    for m in list(r["modes"]):
        if m["mode"].startswith("td@"):
            x = copy.deepcopy(m)
            x["mode"] += "/int4"
            r["modes"].append(x)
    check_chart(r, PER_ROUND + AGAINST_R)


FIND_FIT = "Agents that fit the KV budget by running (--find-fit)"


def test_find_fit_panel_when_a_search_ran():
    # bench-agents --find-fit adds "agents_fit_by_running" and the trials to each mode it searched.
    r = load_report()
    r["modes"] = [m for m in r["modes"] if m["mode"] in ("prefix", "td@0.5")]
    r["modes"][0].update(agents_fit_by_running=13, fit_trials=[
        {"agents": 8, "fits": True, "preemptions": 0}, {"agents": 16, "fits": False, "preemptions": 1},
        {"agents": 12, "fits": True, "preemptions": 0}, {"agents": 13, "fits": True, "preemptions": 0}])
    r["modes"][1].update(agents_fit_by_running=34, fit_trials=[
        {"agents": 32, "fits": True, "preemptions": 0, "waves": 1},
        {"agents": 40, "fits": False, "preemptions": 0, "refused": "the KV budget cannot hold it"},
        {"agents": 34, "fits": True, "preemptions": 0, "waves": 1},
        {"agents": 35, "fits": False, "preemptions": 0, "waves": 2}])
    check_chart(r, PER_ROUND + [FIND_FIT])
    del r["modes"][1]["agents_fit_by_running"]
    with tempfile.TemporaryDirectory() as tmp:
        p, png = draw(r, tmp)
        assert p.returncode == 1 and "agents_fit_by_running" in p.stderr, p.stderr


def test_reports_of_one_setting_are_drawn_as_one():
    # A --find-fit search run per mode: two reports of the same setting, one mode each.
    r = load_report()
    r["modes"] = [m for m in r["modes"] if m["mode"] in ("prefix", "td@0.5")]
    r["modes"][0].update(agents_fit_by_running=31, fit_trials=[
        {"agents": 30, "fits": True, "preemptions": 0}, {"agents": 33, "fits": False, "preemptions": 0}])
    r["modes"][1].update(agents_fit_by_running=126, fit_trials=[
        {"agents": 126, "fits": True, "preemptions": 0, "waves": 1},
        {"agents": 141, "fits": False, "preemptions": 0, "refused": "the KV budget cannot hold it"}])
    first, second = copy.deepcopy(r), copy.deepcopy(r)
    first["modes"], second["modes"] = r["modes"][:1], r["modes"][1:]
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, n) for n in ("a.json", "b.json")]
        for path, report in zip(paths, (first, second)):
            with open(path, "w") as f:
                json.dump(report, f)
        png = os.path.join(tmp, "out.png")
        p = subprocess.run([sys.executable, SCRIPT, *paths, png, "--list-panels"], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == PER_ROUND + [FIND_FIT], p.stdout
        # The same mode twice, or another setting, is refused with what differs.
        p = subprocess.run([sys.executable, SCRIPT, paths[0], paths[0], png], capture_output=True, text=True)
        assert p.returncode == 1 and "mode 'prefix'" in p.stderr, p.stderr
        second["kv_budget_bytes"] = second["kv_budget_bytes"] * 2
        with open(paths[1], "w") as f:
            json.dump(second, f)
        p = subprocess.run([sys.executable, SCRIPT, *paths, png], capture_output=True, text=True)
        assert p.returncode == 1 and "'kv_budget_bytes'" in p.stderr, p.stderr


def test_broken_report_is_one_line_error():
    r = copy.deepcopy(load_report())
    del r["modes"][0]["rounds"][1]["round_latency_seconds"]
    with tempfile.TemporaryDirectory() as tmp:
        p, png = draw(r, tmp)
        assert p.returncode == 1, p
        assert len(p.stderr.splitlines()) == 1 and "round_latency_seconds" in p.stderr, p.stderr
        r["modes"] = []
        p, png = draw(r, tmp)
        assert p.returncode == 1 and "no modes" in p.stderr, p.stderr


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
    print("plot_bench_agents test: ok")
