# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The what-if report: Markdown with a summary table and SVG plots (module_utils/report, the same
style as the planner's report): allocation vs arrived workload (one line per run), fragmentation,
and the requested work placed. Deterministic: no timestamps or timings, so a second run with the
same inputs writes nothing.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer

PICTURES = ("whatif-allocation.svg", "whatif-fragmentation.svg", "whatif-served.svg")


def _label(run, runs):
    scorings = set(r["scoring"] for r in runs)
    sharings = set(r["sharing"] for r in runs)
    if len(sharings) == 1:
        return run["scoring"]
    if len(scorings) == 1:
        return run["sharing"]
    return "%s / %s" % (run["sharing"], run["scoring"])


def _fmt(value, pattern="%.2f"):
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return "%d" % value
    return pattern % value


def _spread(summary, field):
    s = (summary.get("spread") or {}).get(field)
    if not s:
        return ""
    return " ± %.2f" % s["stdev"]


def _source(value):
    return os.path.basename(str(value)) if value else None


def render(result: Mapping[str, Any], title: Optional[str] = None, prefix: str = "") -> Tuple[str, Dict[str, str]]:
    """``(markdown, {picture name: svg})`` of a gpu_whatif result."""
    if result.get("departures"):
        from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import report_timed

        return report_timed.render(result, title, prefix)
    p = result["params"]
    runs = result["runs"]
    names = [prefix + n for n in PICTURES]
    title = title or "GPU utilisation what-if"
    cl = result["cluster"]
    wl = result["workload"]
    md = ["# %s" % title, ""]
    src_nodes = _source(p.get("nodes_csv")) or "%d nodes given as a list" % cl["nodes"]
    src_pods = _source(p.get("pods_csv")) or "%d pods given as a list" % wl["pods"]
    md.append("Cluster: %s — %d nodes (%d with GPUs), %d GPUs (%s)%s." % (
        src_nodes, cl["nodes"], cl["gpu_nodes"], cl["gpus"],
        ", ".join("%s %d" % (m, n) for m, n in sorted(cl["gpus_by_model"].items())),
        (", a sample of %d nodes" % cl["sampled"]) if cl.get("sampled") else ""))
    seeds = wl["seeds"]
    md.append("Workload: %s — %d pods, order `%s`, inflation %.2f (arrivals until %d %% of the GPU capacity is "
              "requested), seed%s %s." % (src_pods, wl["pods"], wl["order"], wl["inflation"],
                                          int(round(wl["inflation"] * 100)), "s" if len(seeds) > 1 else "",
                                          ", ".join(str(s) for s in seeds)))
    md.append("")
    md.append("## At 100 % arrived workload")
    md.append("")
    headers = ["sharing", "scoring", "allocated %", "served %", "fragmented %", "unscheduled pods",
               "GPU-h saved / h", "cost / served GPU-h"]
    rows = []
    for r in runs:
        s = r["summary"]
        rows.append([r["sharing"], r["scoring"],
                     _fmt(s["allocated_pct_at_100"]) + _spread(s, "allocated_pct_at_100"),
                     _fmt(s["served_pct_at_100"]) + _spread(s, "served_pct_at_100"),
                     _fmt(s["frag_pct_at_100"]), _fmt(s["unscheduled_pods_at_100"], "%.1f"),
                     _fmt(s["gpu_hours_saved"], "%.1f"), _fmt(s["cost_per_served_gpu_hour"], "%.4f")])
    md.append(writer.table(headers, rows, ["l", "l", "r", "r", "r", "r", "r", "r"]).rstrip("\n"))
    md.append("")
    md.append("*allocated*: GPU capacity bound to pods; *served*: the trace's own request of the pods placed (a "
              "whole GPU or a MIG slice bound to a smaller request counts fully as allocated, only the request as "
              "served); *fragmented*: idle GPU capacity that the typical pods cannot use (FGD's measure); "
              "*GPU-h saved / h*: GPUs that whole-GPU allocation of the same placed pods would hold beyond this "
              "mode.%s" % (" Means over the seeds (± one standard deviation)." if len(seeds) > 1 else ""))
    md.append("")
    md.append("![allocation](%s)" % names[0])
    md.append("")
    md.append("![fragmentation](%s)" % names[1])
    md.append("")
    md.append("![served](%s)" % names[2])
    md.append("")
    md.append("## Definitions")
    md.append("")
    md.append("Replay protocol and metrics of the FGD artefact (Weng et al., ATC '23; "
              "hkust-adsl/kubernetes-scheduler-simulator): pods arrive one by one and never leave; after each "
              "arrival the GPU allocation ratio is recorded against the arrived workload (cumulative requested "
              "GPU / capacity), then averaged per 1 % of arrived workload. See docs/whatif.md.")
    md.append("")
    markdown = "\n".join(md) + "\n"

    def series(key):
        return [{"name": _label(r, runs), "points": [(pt["arrived_pct"], pt[key]) for pt in r["curve"]]} for r in runs]

    top = max([pt["arrived_pct"] for r in runs for pt in r["curve"]] or [100])
    pictures = {
        names[0]: svg.line_chart(series("allocated_pct"), "GPU allocation vs arrived workload",
                                 "arrived workload (% of GPU capacity)", "allocated GPU (%)",
                                 x_range=(0, top), y_range=(0, 100)),
        names[1]: svg.line_chart(series("frag_pct"), "Fragmented GPU vs arrived workload",
                                 "arrived workload (% of GPU capacity)", "fragmented GPU (% of capacity)",
                                 x_range=(0, top)),
        names[2]: svg.line_chart(series("served_pct"), "Requested work placed vs arrived workload",
                                 "arrived workload (% of GPU capacity)", "served GPU request (%)",
                                 x_range=(0, top), y_range=(0, 100)),
    }
    return markdown, pictures


def write(result: Mapping[str, Any], path: str, check_mode: bool = False, title: Optional[str] = None) -> Dict[str, Any]:
    markdown, pictures = render(result, title)
    return writer.write_report(path, markdown, pictures, check_mode=check_mode, default_name="whatif.md")
