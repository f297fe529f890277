#!/usr/bin/env python3
# Draws the charts of a bench-agents run into one PNG, from the JSON report that
# `agentkv bench-agents --json` writes (`--plot` runs this script on it). Matplotlib (Debian
# python3-matplotlib), Agg backend: no display needed.
#
# Panels, 2 per row, one bar colour per KV mode, x = round:
#   prefill tokens computed per agent, round latency, TTFT p50, KV per agent (resident), prefix-cache
#   hit rate, agents whose contexts fit the KV budget. A tokendance mode's KV bars carry a black tick at
#   the floor of its agents' private tokens ("floor_bytes_per_agent"). A mode that ran only a sample of the agents
#   (bench-agents --sample; the report lists them in "sampled_agents" with "replayed_from") says so in
#   its legend and has no bars in the panels that depend on how many agents ran (latency, TTFT).
# With two or more tokendance recompute ratios (td@R modes with quality measured), four more panels
# against R: KL(exact || shared) mean and p95; top-1 and greedy agreement with the exact context;
# the answers' perplexity under the exact and the shared context; prefill time per agent over all
# rounds, with prefix mode as a flat reference when it ran.
# With --find-fit (modes carrying "fit_trials"), one more panel: per mode, a bar at the agents that fit
# the budget by running ("agents_fit_by_running") and every trial the search ran as a marker at its
# agent count, filled where the run held, a cross where it did not (preempted, refused, in waves, or a prefix
# agent's history evicted between rounds).
#
# usage: plot_bench_agents.py REPORT.json [MORE.json ...] OUT.png [--list-panels]
#   Several reports are drawn as one when they are runs of one setting (the same model, workload, agents,
#   rounds, threads and KV budget) with different modes, e.g. a --find-fit search run per mode; a mode
#   in two reports, or a setting that differs, is refused with the field named.
#   --list-panels  also print the title of each panel drawn, one per line (the tests read them)
import argparse
import json
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

# The layout the tests check: a header (title and the legend of the KV modes) of HEADER_HEIGHT
# pixels, then COLUMNS panels per row, each PANEL_WIDTH x PANEL_HEIGHT pixels.
COLUMNS = 2
PANEL_WIDTH = 640
PANEL_HEIGHT = 440
HEADER_HEIGHT = 90
DPI = 100
# The plot area inside a panel: room for the y ticks and label on the left, the title on top, the x
# ticks and label below.
PLOT_LEFT, PLOT_RIGHT, PLOT_TOP, PLOT_BOTTOM = 85, 25, 40, 70

MIB = 1 << 20

# (title, y-axis label, field of a round in the report, scale applied to the field, how the field
# compares across modes: "per agent" (divided by the round's agents here), "agent" (already per agent
# or a rate) or "run" (depends on how many agents ran: not drawn for a sampled mode))
PER_ROUND_PANELS = [
    ("Prefill tokens computed per agent", "tokens run through the model", "prefill_tokens_computed", 1, "per agent"),
    ("Round latency (submit to last token)", "seconds", "round_latency_seconds", 1, "run"),
    ("Time to first token, median (p50)", "seconds", "ttft_p50_seconds", 1, "run"),
    ("KV cache per agent, all contexts resident", "MiB per agent", "kv_bytes_per_agent_resident", 1 / MIB, "agent"),
    ("Prefix-cache hit rate", "% of prompt tokens reused", "cache_hit_rate", 100, "agent"),
    ("Agents whose contexts fit the KV budget", "agents", "max_agents_in_budget", 1, "agent"),
]

MODE_MEANING = {"nocache": "no KV reuse", "prefix": "prefix cache"}


class ReportError(Exception):
    pass


def value(d, key, where):
    """d[key] as a float; null (a non-finite number in the report) is NaN, which draws nothing."""
    if key not in d:
        raise ReportError(f"{where} has no '{key}'")
    v = d[key]
    return math.nan if v is None else float(v)


def sampled(m):
    """Whether the mode ran only a sample of the agents (its other agents replayed another run)."""
    return bool(m.get("replayed_from"))


def mode_label(m, n_agents):
    mode = m["mode"]
    if mode.startswith("td@"):
        ratio, _, fmt = mode[3:].partition("/")
        label = f"{mode}: tokendance, recompute R={ratio}" + (f", {fmt} diff rows" if fmt else "")
    else:
        meaning = MODE_MEANING.get(mode)
        label = f"{mode}: {meaning}" if meaning else mode
    if sampled(m):
        label += f" ({len(m.get('sampled_agents', []))} of {n_agents} agents sampled)"
    return label


def round_value(r, field, scale, kind, where):
    v = value(r, field, where) * scale
    if kind == "per agent":
        v /= max(1.0, value(r, "agents", where))
    return v


def human_bytes(b):
    if b >= 1 << 30:
        return f"{b / (1 << 30):.2f} GiB"
    if b >= MIB:
        return f"{b / MIB:.0f} MiB"
    return f"{b / 1024:.0f} KiB"


def bar_value_text(v):
    if math.isnan(v):
        return ""
    if abs(v) >= 100 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.3g}"


def draw_round_bars(ax, modes, rounds, n_agents, title, ylabel, field, scale, kind, colors):
    n = len(modes)
    width = min(0.8 / n, 0.4)  # a lone mode's bars are not a wall
    labelled = n * len(rounds) <= 24  # beyond that the numbers overlap; the axis still reads
    floor_mark = None  # the last floor tick drawn: the legend's one entry
    for i, m in enumerate(modes):
        by_round = {int(r["round"]): r for r in m["rounds"]}
        ys = [round_value(by_round[k], field, scale, kind, f"mode {m['mode']} round {k}")
              if k in by_round and not (kind == "run" and sampled(m)) else math.nan for k in rounds]
        xs = [j + width * (i + 0.5 - n / 2) for j in range(len(rounds))]  # the group centred on its round
        bars = ax.bar(xs, ys, width * 0.92, label=mode_label(m, n_agents), color=colors[m["mode"]])
        if labelled:
            ax.bar_label(bars, labels=[bar_value_text(y) for y in ys], fontsize=7, padding=2)
        if field == "kv_bytes_per_agent_resident":  # tokendance: the floor of the agents' private tokens
            for x, k in zip(xs, rounds):
                floor = by_round.get(k, {}).get("floor_bytes_per_agent", 0) * scale
                if floor > 0:
                    floor_mark = ax.hlines(floor, x - width * 0.46, x + width * 0.46, colors="black", linewidth=1.5,
                                           label="floor: the agent's private tokens")
    if floor_mark is not None:
        ax.legend(handles=[floor_mark], fontsize=8, loc="upper left")
    ax.set_xticks(range(len(rounds)), [f"round {k}" for k in rounds])
    ax.set_xlim(-0.6, len(rounds) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.margins(y=0.15)  # room above the tallest bar for its number
    ax.set_ylim(bottom=0)
    if not any(b.get_height() > 0 for b in ax.patches):
        ax.set_ylim(0, 1)  # all zero: a plain 0-1 axis rather than matplotlib's +-0.06 around it
    ax.grid(axis="y", color="0.9")
    ax.set_axisbelow(True)


def draw_ratio_lines(ax, ratios, series, title, ylabel):
    """series: (legend label, y values per ratio, style dict)."""
    for label, ys, style in series:
        ax.plot(ratios, ys, label=label, **style)
    ax.set_xticks(ratios, [f"{r:g}" for r in ratios])
    ax.set_xlabel("recompute ratio R (share of the shared segment recomputed per agent)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(color="0.9")
    ax.legend(fontsize=8, framealpha=0.9)


def recompute_panels(modes):
    """The panels against R, as (title, draw(ax)) pairs; none unless two or more ratios were measured."""
    # Modes are td@R, or td@R/FORMAT with more than one --diff-format: R varies within one format.
    by_format = {}
    for m in modes:
        if m["mode"].startswith("td@") and m["overall"].get("quality_agents", 0) > 0:
            ratio, _, fmt = m["mode"][3:].partition("/")
            by_format.setdefault(fmt, []).append((float(ratio), m))
    groups = [g for g in by_format.values() if len(g) >= 2]
    if not groups:
        return []
    group = sorted(max(groups, key=len), key=lambda rm: rm[0])
    ratios = [r for r, _ in group]
    td = [m for _, m in group]

    def overall(field, scale=1, kind="agent"):
        return [round_value(m["overall"], field, scale, kind, f"mode {m['mode']} overall") for m in td]

    line = {"marker": "o"}
    dashed = {"marker": "s", "linestyle": "--"}
    prefill = [("tokendance", overall("prefill_seconds", kind="per agent"), line)]
    prefix = [m for m in modes if m["mode"] == "prefix"]
    if prefix:
        per_agent = round_value(prefix[0]["overall"], "prefill_seconds", 1, "per agent", "mode prefix overall")
        prefill.append(("prefix (reference)", [per_agent] * len(ratios), {"linestyle": ":", "color": "0.4"}))
    specs = [
        ("KL(exact || shared) of the next token vs R", "nats",
         [("mean", overall("kl_mean"), line), ("p95", overall("kl_p95"), dashed)]),
        ("Agreement with the exact context vs R", "% of answer tokens",
         [("top-1, teacher-forced", overall("top1_agreement", 100), line),
          ("greedy, first 32 tokens", overall("greedy_agreement", 100), dashed)]),
        ("Perplexity of the answers vs R", "perplexity",
         [("exact context", overall("perplexity_exact"), line),
          ("shared context", overall("perplexity_tokendance"), dashed)]),
        ("Prefill time per agent, all rounds, vs R", "seconds per agent", prefill),
    ]
    return [(title, lambda ax, t=title, y=ylabel, s=series: draw_ratio_lines(ax, ratios, s, t, y))
            for title, ylabel, series in specs]


FIND_FIT_TITLE = "Agents that fit the KV budget by running (--find-fit)"


def draw_find_fit(ax, modes, colors):
    """Per mode with a search: its result as a bar, each trial as a marker (held: dot, not: cross)."""
    held = failed = None
    prefix = [value(m, "agents_fit_by_running", "mode prefix") for m in modes if m["mode"] == "prefix"]
    for i, m in enumerate(modes):
        fit = value(m, "agents_fit_by_running", f"mode {m['mode']}")
        bar = ax.bar([i], [fit], 0.5, color=colors[m["mode"]], label=mode_label(m, "?"))
        text = bar_value_text(fit)
        if prefix and prefix[0] > 0 and m["mode"] != "prefix":
            text += f" ({fit / prefix[0]:.2g}x prefix)"
        ax.bar_label(bar, labels=[text], fontsize=9, padding=2)
        for t in m["fit_trials"]:
            n = value(t, "agents", f"mode {m['mode']} trial")
            if t.get("fits"):
                held = ax.plot([i + 0.35], [n], "o", color="tab:green", markersize=5, label="trial: held")[0]
            else:
                failed = ax.plot([i + 0.35], [n], "x", color="tab:red", markersize=6,
                                 label="trial: preempted, refused, in waves or history evicted")[0]
    ax.legend(handles=[h for h in (held, failed) if h is not None], fontsize=8, loc="upper left")
    ax.set_xticks(range(len(modes)), [m["mode"] for m in modes])
    ax.set_xlim(-0.6, len(modes) - 0.2)
    ax.set_ylabel("agents")
    ax.set_title(FIND_FIT_TITLE)
    ax.margins(y=0.15)
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", color="0.9")
    ax.set_axisbelow(True)


def plot(report, out_path):
    """Draws the report into out_path; returns the panel titles drawn, in order."""
    modes = report.get("modes")
    if not modes:
        raise ReportError("the report has no modes")
    rounds = sorted({int(r["round"]) for m in modes for r in m.get("rounds", [])})
    if not rounds:
        raise ReportError("the report has no rounds")
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {m["mode"]: cycle[i % len(cycle)] for i, m in enumerate(modes)}

    n_agents = report.get("agents", "?")
    panels = [(title, lambda ax, p=(title, ylabel, field, scale, kind):
               draw_round_bars(ax, modes, rounds, n_agents, *p, colors))
              for title, ylabel, field, scale, kind in PER_ROUND_PANELS]
    panels += recompute_panels(modes)
    searched = [m for m in modes if m.get("fit_trials")]
    if searched:
        panels.append((FIND_FIT_TITLE, lambda ax: draw_find_fit(ax, searched, colors)))

    cols = min(COLUMNS, len(panels))
    rows = math.ceil(len(panels) / cols)
    width, height = cols * PANEL_WIDTH, rows * PANEL_HEIGHT + HEADER_HEIGHT
    fig = plt.figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    fig.suptitle(f"bench-agents: {report.get('model', '?')}, workload {report.get('workload', '?')}, "
                 f"{report.get('agents', '?')} agents, {len(rounds)} round{'s' if len(rounds) != 1 else ''}, "
                 f"KV budget {human_bytes(float(report.get('kv_budget_bytes', 0)))}, "
                 f"{report.get('threads', '?')} threads", y=1 - 8 / height, va="top", fontsize=14)
    axes = []
    for i, (_, draw) in enumerate(panels):
        row, col = divmod(i, cols)
        left = col * PANEL_WIDTH + PLOT_LEFT
        bottom = height - HEADER_HEIGHT - (row + 1) * PANEL_HEIGHT + PLOT_BOTTOM
        ax = fig.add_axes([left / width, bottom / height, (PANEL_WIDTH - PLOT_LEFT - PLOT_RIGHT) / width,
                           (PANEL_HEIGHT - PLOT_TOP - PLOT_BOTTOM) / height])
        draw(ax)
        axes.append(ax)
    # One legend for the modes: every bar panel colours them alike.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, title="KV mode", loc="upper center", bbox_to_anchor=(0.5, 1 - 34 / height),
               ncol=min(len(modes), 4), fontsize=9, title_fontsize=9, frameon=False)
    fig.savefig(out_path, dpi=DPI)
    plt.close(fig)
    return [ax.get_title() for ax in axes]


def merge_reports(reports, names):
    """One report from runs of one setting with different modes (e.g. a --find-fit search per mode)."""
    merged = dict(reports[0])
    merged["modes"] = list(reports[0].get("modes", []))
    for report, name in zip(reports[1:], names[1:]):
        for key in sorted(set(merged) | set(report)):
            if key != "modes" and merged.get(key) != report.get(key):
                raise ReportError(f"{name}: '{key}' is {report.get(key)!r}, {names[0]} has {merged.get(key)!r}:"
                                  " not a run of the same setting")
        seen = {m["mode"] for m in merged["modes"]}
        for m in report.get("modes", []):
            if m["mode"] in seen:
                raise ReportError(f"{name}: mode '{m['mode']}' is in an earlier report too")
            merged["modes"].append(m)
    return merged


def main():
    ap = argparse.ArgumentParser(description="Charts of a bench-agents JSON report, as one PNG.",
                                 usage="%(prog)s REPORT.json [MORE.json ...] OUT.png [--list-panels]")
    ap.add_argument("paths", nargs="+", metavar="FILE",
                    help="JSON written by agentkv bench-agents --json (several: runs of one setting with "
                         "different modes, drawn as one), then the PNG file to write")
    ap.add_argument("--list-panels", action="store_true", help="print the title of each panel drawn")
    args = ap.parse_args()
    if len(args.paths) < 2:
        ap.error("give at least one report and the PNG to write")
    names, png = args.paths[:-1], args.paths[-1]
    try:
        reports = []
        for name in names:
            with open(name) as f:
                reports.append(json.load(f))
        titles = plot(merge_reports(reports, names), png)
    except (OSError, ValueError, KeyError, TypeError, ReportError) as e:
        print(f"plot_bench_agents.py: {', '.join(names)}: {e}", file=sys.stderr)
        return 1
    if args.list_panels:
        print("\n".join(titles))
    return 0


if __name__ == "__main__":
    sys.exit(main())
