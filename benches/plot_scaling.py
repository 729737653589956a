#!/usr/bin/env python3
"""Draws benches/scaling.sh's curves into one PNG.

    benches/plot_scaling.py OUT_DIR [OUT_DIR ...] [--meta-load FILE] [-o PNG]

Reads OUT_DIR/partitions.jsonl and OUT_DIR/agents.jsonl (either may be
missing; a .jsonl path works too, and several OUT_DIRs are merged, e.g. a
partitions run and an agents run made apart). Panels, each drawn only when
its data is there:

  1. produce MiB/s at max rate against the partitions (log x), per system;
     the 1000 topics x 4 shape as its own marker beside the one-topic curve
  2. ack latency against the partitions: p50 and p99 at the fixed rate,
     p99 at max rate (log x, log y)
  3. rutomq's PostgreSQL per commit transaction against the partitions:
     spans per transaction and PostgreSQL CPU ms per transaction
  4. agents sharing one PostgreSQL: aggregate MiB/s (and N x the one-agent
     figure, dashed) and MiB per CPU second of all agents + PostgreSQL
  5. --meta-load FILE: JSON lines of a metadata-load driver (rutomq-meta-load)
     with `agents`, `achieved_windows_per_s` and `commit_p99_ms` (or
     `commit_latency_ms.p99`; `offered_windows_per_s` is drawn dotted when
     there): windows/s and commit p99 against the agents, one line per value
     of `target_windows_per_s`, `label`, `window_ms` or
     `partitions_per_window` when rows differ in it. A path that does not
     exist is skipped with a note.

Default output: FIRST_OUT_DIR/scaling.png.

matplotlib is pinned in benches/requirements-plot.txt. Without it, the
script makes its own venv in tests/.cache/plot-venv on first use
(re-made when the requirements file changes) and runs itself again there.
"""
import argparse
import hashlib
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REQUIREMENTS = os.path.join(HERE, "requirements-plot.txt")
VENV = os.path.join(REPO, "tests", ".cache", "plot-venv")


def ensure_matplotlib():
    """Imports matplotlib, or re-runs this script in a venv that has it."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("RUTOMQ_PLOT_VENV"):
        sys.exit(f"plot_scaling: matplotlib still missing in {VENV}; remove it and retry")
    with open(REQUIREMENTS, "rb") as f:
        want = hashlib.sha256(f.read()).hexdigest()
    stamp = os.path.join(VENV, ".requirements.sha256")
    python = os.path.join(VENV, "bin", "python")
    have = open(stamp).read().strip() if os.path.exists(stamp) else ""
    if have != want or not os.path.exists(python):
        print(f"plot_scaling: installing {REQUIREMENTS} into {VENV}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", VENV], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", REQUIREMENTS], check=True)
        with open(stamp, "w") as f:
            f.write(want + "\n")
    env = dict(os.environ, RUTOMQ_PLOT_VENV="1")
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:], env)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def gather(paths):
    """Partition rows, agent rows and run headers from OUT_DIRs or .jsonl files."""
    parts, agents, headers = [], [], []
    for p in paths:
        files = [p] if p.endswith(".jsonl") else [os.path.join(p, "partitions.jsonl"),
                                                   os.path.join(p, "agents.jsonl")]
        found = False
        for f in files:
            if not os.path.exists(f):
                continue
            found = True
            rows = read_jsonl(f)
            (agents if os.path.basename(f).startswith("agents") else parts).extend(rows)
            mode = "agents" if os.path.basename(f).startswith("agents") else "partitions"
            h = os.path.join(os.path.dirname(f), mode, "header.json")
            if os.path.exists(h):
                with open(h) as hf:
                    headers.append(json.load(hf))
        if not found:
            sys.exit(f"plot_scaling: no partitions.jsonl or agents.jsonl in {p}")
    return parts, agents, headers


SYSTEM_COLORS = {"rutomq": "tab:blue", "kafka": "tab:orange"}
# Systems named otherwise (e.g. "rutomq <rev>" rows relabelled to compare
# builds) get these in order of first use: the earliest gray, the next blue.
OTHER_COLORS = ["tab:gray", "tab:blue", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
_other = {}


def color(system):
    if system in SYSTEM_COLORS:
        return SYSTEM_COLORS[system]
    if system not in _other:
        _other[system] = OTHER_COLORS[len(_other) % len(OTHER_COLORS)]
    return _other[system]


def is_rutomq(system):
    return system == "rutomq" or system.startswith("rutomq ")


def split_shapes(rows):
    """(one-topic rows sorted by partitions, multi-topic rows)."""
    one = sorted((r for r in rows if r.get("topics", 1) == 1), key=lambda r: r["partitions_total"])
    many = [r for r in rows if r.get("topics", 1) != 1]
    return one, many


def by_system(rows, run):
    out = {}
    for r in rows:
        if r.get("run") == run:
            out.setdefault(r.get("system", "rutomq"), []).append(r)
    return out


def shape_label(r):
    return f"{r['topics']} topics x {r['partitions']}"


def panel_throughput(ax, rows):
    for system, rs in by_system(rows, "max").items():
        one, many = split_shapes(rs)
        c = color(system)
        if one:
            ax.plot([r["partitions_total"] for r in one], [r["mib_s"] for r in one], "o-", color=c,
                    label=f"{system}, one topic")
        for r in many:
            ax.plot([r["partitions_total"]], [r["mib_s"]], "s", color=c, mfc="none", ms=9,
                    label=f"{system}, {shape_label(r)}")
    ax.set_xscale("log")
    ax.set_xlabel("partitions (total)")
    ax.set_ylabel("MiB/s")
    ax.set_title("Max produce throughput")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def panel_latency(ax, rows):
    styles = [("fixed", "p99_ms", "o-", "p99"), ("fixed", "p50_ms", "o:", "p50"),
              ("max", "p99_ms", "^--", "p99 at max rate")]
    for run, key, style, what in styles:
        for system, rs in by_system(rows, run).items():
            one, many = split_shapes(rs)
            c = color(system)
            rate = next((r.get("rate_asked") for r in rs if r.get("rate_asked")), None)
            label = f"{system} {what}" + (f" at {rate:,} rec/s" if run == "fixed" and rate else "")
            pts = [(r["partitions_total"], r[key]) for r in one if r.get(key)]
            if pts:
                ax.plot(*zip(*pts), style, color=c, label=label)
            for r in many:
                if r.get(key):
                    ax.plot([r["partitions_total"]], [r[key]], style[0], color=c, mfc="none", ms=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions (total); hollow: 1000 topics x 4")
    ax.set_ylabel("ack latency, ms")
    ax.set_title("Produce ack latency (acks=all)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def panel_postgres(ax, rows):
    # One rutomq build: the one with the most rows (a curve, not a point or
    # two of a partial rerun), the last named among equals (the newest, when
    # builds are compared).
    names = [r.get("system", "rutomq") for r in rows if is_rutomq(r.get("system", "rutomq"))]
    if names:
        names.append(max(reversed(names), key=names.count))
    rs = [r for r in rows if names and r.get("system", "rutomq") == names[-1]]
    twin = ax.twinx()
    for run, style in (("max", "o-"), ("fixed", "o:")):
        one, many = split_shapes([r for r in rs if r.get("run") == run])
        pts = [(r["partitions_total"], r["spans_per_txn"]) for r in one if r.get("spans_per_txn")]
        if pts:
            ax.plot(*zip(*pts), style, color="tab:green", label=f"spans/txn, {run}")
        pts = [(r["partitions_total"], r["pg_cpu_ms_per_txn"]) for r in one if r.get("pg_cpu_ms_per_txn")]
        if pts:
            twin.plot(*zip(*pts), style.replace("o", "s"), color="tab:red", label=f"PG CPU ms/txn, {run}")
        for r in many:
            if r.get("spans_per_txn"):
                ax.plot([r["partitions_total"]], [r["spans_per_txn"]], "o", color="tab:green", mfc="none", ms=9)
            if r.get("pg_cpu_ms_per_txn"):
                twin.plot([r["partitions_total"]], [r["pg_cpu_ms_per_txn"]], "s", color="tab:red", mfc="none", ms=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("partitions (total); hollow: 1000 topics x 4")
    ax.set_ylabel("spans per commit transaction", color="tab:green")
    twin.set_ylabel("PostgreSQL CPU ms per commit transaction", color="tab:red")
    twin.set_ylim(bottom=0)
    ax.set_title(f"{names[-1] if names else 'rutomq'}: PostgreSQL work per window commit")
    ax.grid(True, which="both", alpha=0.3)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8)


def panel_agents(ax, rows):
    rows = sorted(rows, key=lambda r: r["agents"])
    n = [r["agents"] for r in rows]
    ax.plot(n, [r["mib_s"] for r in rows], "o-", color="tab:blue", label="aggregate MiB/s")
    one = next((r["mib_s"] for r in rows if r["agents"] == 1), None)
    if one:
        ax.plot(n, [one * k for k in n], "--", color="tab:blue", alpha=0.4, label="N x one agent")
    ax.set_xlabel("agents (one PostgreSQL, one object dir)")
    ax.set_ylabel("MiB/s")
    ax.set_xticks(n)
    ax.set_ylim(bottom=0)
    twin = ax.twinx()
    twin.plot(n, [r.get("mib_per_cpu_s") for r in rows], "s:", color="tab:purple",
              label="MiB per CPU-s (agents + PostgreSQL)")
    twin.set_ylabel("MiB per CPU second", color="tab:purple")
    twin.set_ylim(bottom=0)
    shards = rows[0].get("shards") if rows else None
    ax.set_title(f"Agent scaling (--shards {shards} each)" if shards else "Agent scaling")
    ax.grid(True, alpha=0.3)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="lower right")


def meta_p99(r):
    """Commit p99 of a metadata-load row: `commit_p99_ms`, or rutomq-meta-load's `commit_latency_ms.p99`."""
    if r.get("commit_p99_ms") is not None:
        return r["commit_p99_ms"]
    lat = r.get("commit_latency_ms")
    return lat.get("p99") if isinstance(lat, dict) else None


def panel_meta_load(ax, rows, path):
    # One line per value of the first of these that differs between rows.
    group_key = next((k for k in ("target_windows_per_s", "label", "window_ms", "partitions_per_window")
                      if len({json.dumps(r.get(k)) for r in rows}) > 1), None)
    groups = {}
    for r in rows:
        groups.setdefault(r.get(group_key) if group_key else None, []).append(r)
    twin = ax.twinx()
    cycle = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink"]
    for i, (g, rs) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
        rs = sorted(rs, key=lambda r: r["agents"])
        suffix = f" ({group_key} {g})" if group_key else ""
        # One series: windows blue, p99 red; several: one colour per series.
        c_win, c_p99 = ("tab:blue", "tab:red") if len(groups) == 1 else (cycle[i % len(cycle)],) * 2
        pts = [(r["agents"], r["offered_windows_per_s"]) for r in rs if r.get("offered_windows_per_s") is not None]
        if pts:
            ax.plot(*zip(*pts), ":", color=c_win, alpha=0.5, label=f"offered windows/s{suffix}")
        pts = [(r["agents"], r["achieved_windows_per_s"]) for r in rs if r.get("achieved_windows_per_s") is not None]
        if pts:
            ax.plot(*zip(*pts), "o-", color=c_win, label=f"achieved windows/s{suffix}")
        pts = [(r["agents"], meta_p99(r)) for r in rs if meta_p99(r) is not None]
        if pts:
            twin.plot(*zip(*pts), "s--", color=c_p99, label=f"commit p99 ms{suffix}")
    ax.set_xlabel("agents")
    ax.set_ylabel("windows/s")
    twin.set_ylabel("commit p99, ms")
    ax.set_ylim(bottom=0)
    twin.set_ylim(bottom=0)
    agents = sorted({r["agents"] for r in rows})
    if agents[0] > 0 and agents[-1] / agents[0] >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(agents)
    ax.set_xticklabels([str(a) for a in agents])
    ax.set_title(f"Metadata load ({os.path.basename(path)})")
    ax.grid(True, alpha=0.3)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8)


def main():
    ap = argparse.ArgumentParser(description="Plot benches/scaling.sh results into one PNG.")
    ap.add_argument("inputs", nargs="+", help="OUT_DIRs of benches/scaling.sh, or .jsonl files")
    ap.add_argument("--meta-load", help="JSON lines of the metadata load driver (skipped if missing)")
    ap.add_argument("-o", "--out", help="PNG to write (default FIRST_INPUT_DIR/scaling.png)")
    args = ap.parse_args()
    ensure_matplotlib()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parts, agents, headers = gather(args.inputs)
    meta = []
    if args.meta_load:
        if os.path.exists(args.meta_load):
            meta = [r for r in read_jsonl(args.meta_load) if "agents" in r]
        else:
            print(f"plot_scaling: no {args.meta_load}; no metadata load panel", file=sys.stderr)
    panels = []
    if parts:
        panels += [lambda ax: panel_throughput(ax, parts), lambda ax: panel_latency(ax, parts)]
        if any(r.get("spans_per_txn") or r.get("pg_cpu_ms_per_txn") for r in parts):
            panels.append(lambda ax: panel_postgres(ax, parts))
    if agents:
        panels.append(lambda ax: panel_agents(ax, agents))
    if meta:
        panels.append(lambda ax: panel_meta_load(ax, meta, args.meta_load))
    if not panels:
        sys.exit("plot_scaling: nothing to plot")
    cols = 2 if len(panels) > 1 else 1
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4.8 * rows), squeeze=False)
    for ax, draw in zip(axes.flat, panels):
        draw(ax)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    facts = sorted({f"{h.get('git_rev', '?')}{' (dirty)' if h.get('git_dirty') == 'yes' else ''}, "
                    f"{h.get('nproc', '?')} cores, {h.get('cpu', '')}" for h in headers})
    rec = next((r.get("duration") for r in parts + agents if r.get("duration")), None)
    fig.suptitle("rutomq scaling (benches/scaling.sh): 1 KiB records, acks=all"
                 + (f", {rec} s per run" if rec else "") + ("\n" + "; ".join(facts) if facts else ""),
                 fontsize=10)
    fig.tight_layout()
    out = args.out or os.path.join(
        args.inputs[0] if os.path.isdir(args.inputs[0]) else os.path.dirname(os.path.abspath(args.inputs[0])),
        "scaling.png")
    fig.savefig(out, dpi=110)
    print(out)


if __name__ == "__main__":
    main()
