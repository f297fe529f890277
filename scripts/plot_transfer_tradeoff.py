#!/usr/bin/env python3
# Draws what a transferred context keeps against the prefill time it saves (issue 19, deliverable 3),
# from the CSV files `agentkv transfer-quality --csv` and `agentkv transfer-retrieval --csv` write: one
# PNG, two panels, one line per direction and method family (pure transfer, last:K native suffix,
# dev:R hybrid by deviation), a point per share.
#   left:  share of the context's value kept (continuation NLL, (c-b)/(c-a)) vs the saving;
#   right: recall relative to the receiver's own prefill (hits / native hits) vs the saving.
# The x axis is 1 - the receiver's native work share (token x layer passes it ran itself, from the
# transfer reports): the saving in prefill compute, deterministic. `--x wall` plots the measured
# wall-clock saving instead (the quality CSVs' ttft_saving: it also pays the projection; value panel
# only). A file given as LABEL=PATH (e.g. a context size) is a series of its own, its points named LABEL.
# Dashed lines mark the goals (0.90 of the value, 0.90 of native recall, 70% saving).
# Matplotlib, Agg backend.
#
# usage: plot_transfer_tradeoff.py OUT.png --quality [LABEL=]Q.csv ... [--recall R.csv ...] [--x work|wall]
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

QUALITY_FIELDS = {"sender", "receiver", "mode", "kept", "native_work"}
RECALL_FIELDS = {"sender", "receiver", "task", "mode", "hits", "native_hits", "native_work"}
GOAL_SAVING = 0.70
GOAL_KEPT = 0.90


def family(mode):
    """The method a mode label belongs to: transfer, last (native suffix) or dev (by deviation)."""
    if mode == "transfer":
        return "transfer"
    return "+".join(part.split(":")[0] if ":" in part else "last" for part in mode.split("+"))


def read_rows(path, fields):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ValueError(f"{path}: no rows")
    missing = fields - set(rows[0].keys())
    if missing:
        raise ValueError(f"{path}: missing columns {sorted(missing)}")
    return rows


def read_labelled(arg, fields):
    """LABEL=PATH or PATH: the file's rows, each with its mode named LABEL mode when labelled."""
    label, _, path = arg.rpartition("=") if "=" in arg else ("", "", arg)
    rows = read_rows(path, fields)
    for r in rows:
        r["label"] = label
    return rows


def saving_of(x):
    """The x value of a row: compute saved (1 - native work share) or measured wall-clock saving."""
    if x == "wall":
        return lambda r: float(r["ttft_saving"])
    return lambda r: 1.0 - float(r["native_work"])


def series(rows, y_of, x_of=None):
    """{(direction, family): [(saving, y, mode)]} sorted by saving; the pure transfer joins each family."""
    x_of = x_of or saving_of("work")
    out = {}
    pure = {}
    for r in rows:
        # A labelled file (a context size, say) is a series of its own, its points named by the label.
        label = r.get("label")
        direction = f"{r['sender']} → {r['receiver']}" + (f", {label}" if label else "")
        point = (x_of(r), y_of(r), label or r["mode"])
        if r["mode"] == "transfer":
            pure[direction] = point
        else:
            out.setdefault((direction, family(r["mode"])), []).append(point)
    for (direction, _), points in out.items():
        if direction in pure:
            points.append(pure[direction])
    for direction, point in pure.items():
        if not any(d == direction for d, _ in out):
            out[(direction, "transfer")] = [point]
    return {k: sorted(v) for k, v in sorted(out.items())}


def draw(ax, lines, title, ylabel, goal, xlabel):
    markers = {"last": "s", "dev": "o", "dev+last": "D", "transfer": "x"}
    for (direction, fam), points in lines.items():
        xs = [100 * p[0] for p in points]
        ys = [p[1] for p in points]
        ax.plot(xs, ys, marker=markers.get(fam, "^"), label=f"{direction}, {fam}")
        for x, y, mode in points:
            ax.annotate(mode, (100 * x, y), textcoords="offset points", xytext=(3, 4), fontsize=7)
    ax.axhline(goal, linestyle="--", color="grey", linewidth=1)
    ax.axvline(100 * GOAL_SAVING, linestyle="--", color="grey", linewidth=1)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("out")
    ap.add_argument("--quality", nargs="+", required=True, help="transfer-quality --csv files")
    ap.add_argument("--recall", nargs="*", default=[], help="transfer-retrieval --csv files")
    ap.add_argument("--x", choices=["work", "wall"], default="work",
                    help="x axis: compute saved (work, default) or measured wall-clock saving (wall)")
    a = ap.parse_args(argv)
    if a.x == "wall" and a.recall:
        print("plot_transfer_tradeoff: --x wall plots the value panel only (recall files carry no timing)",
              file=sys.stderr)
        return 1
    try:
        fields = QUALITY_FIELDS | ({"ttft_saving"} if a.x == "wall" else set())
        quality = [r for p in a.quality for r in read_labelled(p, fields)]
        recall = [r for p in a.recall for r in read_labelled(p, RECALL_FIELDS)]
        q_lines = series(quality, lambda r: float(r["kept"]), saving_of(a.x))
        r_lines = series(recall, lambda r: int(r["hits"]) / max(1, int(r["native_hits"])), saving_of(a.x))
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_transfer_tradeoff: {e}", file=sys.stderr)
        return 1
    xlabel = ("native prefill time saved, % (measured)" if a.x == "wall"
              else "prefill compute saved, % (1 − receiver's native work share)")
    panels = 2 if recall else 1
    fig, axes = plt.subplots(1, panels, figsize=(7.5 * panels, 5.5), dpi=100, squeeze=False)
    draw(axes[0][0], q_lines, "Context value kept vs prefill saved", "value kept, (c−b)/(c−a)", GOAL_KEPT, xlabel)
    if recall:
        task = ", ".join(sorted({r["task"] for r in recall}))
        draw(axes[0][1], r_lines, f"Recall ({task}) vs prefill saved", "hits / native hits", GOAL_KEPT, xlabel)
    fig.tight_layout()
    fig.savefig(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
