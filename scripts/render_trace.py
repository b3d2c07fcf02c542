"""Draws a Chrome-trace JSON (torch.profiler's export_chrome_trace) as a timeline picture, the
way Perfetto lays it out: one lane per process/thread (CPU threads, then one per musa stream),
each complete event a bar, nested events stacked below their parents.

    python scripts/render_trace.py trace.json trace.png [--max-lanes-depth 4]

Needs matplotlib (a documentation tool, not a torch_musa dependency).
"""
import argparse
import os
import json
from collections import defaultdict

COLORS = {"cpu_op": "#4e79a7", "user_annotation": "#9c755f", "python_function": "#bab0ac",
          "kernel": "#e15759", "gpu_memcpy": "#59a14f", "gpu_memset": "#edc948",
          "gpu_user_annotation": "#b07aa1", "cpu_instant_event": "#76b7b2"}


def lanes_of(trace):
    names, events = {}, defaultdict(list)
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            names[("p", e["pid"])] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e.get("ph") == "X" and isinstance(e.get("pid"), int) and e.get("cat") != "python_function":
            events[(e["pid"], e["tid"])].append(e)
    return names, events


def depth_of(evs):
    """Stack depth per event: an event inside an open one goes one row lower."""
    evs.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    open_ends, out = [], []
    for e in evs:
        end = e["ts"] + e.get("dur", 0)
        while open_ends and open_ends[-1] <= e["ts"]:
            open_ends.pop()
        out.append((e, len(open_ends)))
        open_ends.append(end)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--max-depth", type=int, default=4)
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(a.trace) as f:
        trace = json.load(f)
    names, events = lanes_of(trace)
    # CPU lanes first (the process pid is large), then musa devices (pid = device index).
    keys = sorted(events, key=lambda k: (k[0] < 1000, k[0], k[1]))
    t0 = min(e["ts"] for evs in events.values() for e in evs)
    rows, labels, y = [], [], 0
    for k in keys:
        placed = [(e, d) for e, d in depth_of(events[k]) if d < a.max_depth]
        depth = 1 + max(d for _, d in placed)
        proc = names.get(("p", k[0]), str(k[0]))
        labels.append((y + depth / 2, f"{proc} / {names.get(k, k[1])}"))
        rows += [(e, y + d) for e, d in placed]
        y += depth + 0.5
    fig, ax = plt.subplots(figsize=(16, max(3, 0.42 * y + 1)))
    for e, row in rows:
        start, dur = (e["ts"] - t0) / 1e3, max(e.get("dur", 0) / 1e3, 1e-4)
        ax.barh(row + 0.45, dur, left=start, height=0.9, color=COLORS.get(e.get("cat"), "#aaaaaa"),
                edgecolor="white", linewidth=0.3)
        if dur > 0.03 * ((max(r[0]["ts"] + r[0].get("dur", 0) for r in rows) - t0) / 1e3):
            ax.text(start + dur / 2, row + 0.45, e["name"][:28], ha="center", va="center", fontsize=6,
                    color="white", clip_on=True)
    ax.set_yticks([p for p, _ in labels], [n for _, n in labels], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms since trace start")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, COLORS.keys(), loc="upper right", fontsize=7, ncol=4)
    ax.set_title(f"{os.path.basename(a.trace)}: CPU threads and musa streams")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
