# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The what-if report of a replay with departures (``departures: true``): the summary per run and three
pictures over the trace's time - GPUs held, pods pending, GPUs reconfigured so far. Deterministic (no
timings), so a second run with the same inputs writes nothing.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer

PICTURES = ("whatif-held.svg", "whatif-pending.svg", "whatif-reconfigured.svg")
HEADERS = ["sharing", "scoring", "GPU-h held", "GPU-h allocated", "served %", "never placed",
           "pending median / p95 (s)", "waited: median / p95 (s)", "GPUs reconfigured / day"]


def _f(value, pattern="%.2f"):
    if value is None:
        return "n/a"
    return pattern % value


def _sd(summary, field):
    s = (summary.get("spread") or {}).get(field)
    return " ± %.2f" % s["stdev"] if s else ""


def rows(runs: Sequence[Mapping[str, Any]]) -> List[List[str]]:
    """The table rows (also used by benchmarks/whatif_replanned.py)."""
    out = []
    for r in runs:
        s = r["summary"]
        out.append([r["sharing"], r["scoring"], _f(s["gpu_hours_held"], "%.1f") + _sd(s, "gpu_hours_held"),
                    _f(s["gpu_hours_allocated"], "%.1f"), _f(s["served_pct"], "%.2f") + _sd(s, "served_pct"),
                    _f(s["pods_never_placed"], "%.1f"),
                    "%s / %s" % (_f(s["pending_median_s"], "%.0f"), _f(s["pending_p95_s"], "%.0f")),
                    "%s / %s" % (_f(s["pending_waited_median_s"], "%.0f"), _f(s["pending_waited_p95_s"], "%.0f")),
                    _f(s["reconfigured_gpus_per_day"], "%.2f")])
    return out


def _label(run, runs):
    if len(set(r["scoring"] for r in runs)) == 1:
        return run["sharing"]
    return "%s / %s" % (run["sharing"], run["scoring"])


def _sampled(cl):
    if cl.get("cluster_gpus"):
        return ", a nested sample of about %d GPUs per seed (%s)" % (cl["cluster_gpus"],
                                                                     ", ".join(str(g) for g in cl["gpus_per_seed"]))
    if cl.get("searched_up_to_gpus"):
        return ", searched up to %d GPUs" % cl["searched_up_to_gpus"]
    return (", a sample of %d nodes" % cl["sampled"]) if cl.get("sampled") else ""


def render(result: Mapping[str, Any], title: Optional[str] = None, prefix: str = "") -> Tuple[str, Dict[str, str]]:
    """``(markdown, {picture name: svg})``."""
    runs = result["runs"]
    names = [prefix + n for n in PICTURES]
    cl, wl = result["cluster"], result["workload"]
    seeds = wl["seeds"]
    md = ["# %s" % (title or "GPU utilisation what-if, with departures"), ""]
    md.append("Cluster: %d nodes (%d with GPUs), %d GPUs%s. Workload: %d pods, %s arrivals (order `%s`, inflation "
              "%.2f), over %.1f hours of the trace (window `%s`, load factor %g); seed%s %s." % (
                  cl["nodes"], cl["gpu_nodes"], cl["gpus"], _sampled(cl), wl["pods"], "n/a" if wl["arrivals"] is None else wl["arrivals"], wl["order"],
                  wl["inflation"], wl["trace_end_hours"], wl.get("window", "whole"), wl.get("load_factor", 1.0),
                  "s" if len(seeds) > 1 else "", ", ".join(str(s) for s in seeds)))
    md.append("")
    md.append(writer.table(HEADERS, rows(runs), ["l", "l", "r", "r", "r", "r", "r", "r", "r"]).rstrip("\n"))
    md.append("")
    md.append("*GPU-h held*: GPUs with at least one pod (or being reconfigured), integrated over the trace; "
              "*allocated*: the GPU share or MIG slices bound to pods; *served*: the trace's request times the time "
              "its pods ran, of what they asked for; *never placed*: pods deleted while pending or still pending at "
              "the trace's end; pending times over the pods placed (*waited*: those that waited at all).%s"
              % (" Means over the seeds (± one standard deviation)." if len(seeds) > 1 else ""))
    md.append("")
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import report_capacity

    cap_md, cap_pics = report_capacity.render(result, [_label(r, runs) for r in runs], prefix)
    md += cap_md
    for n, what in zip(names, ("GPUs held", "pods pending", "GPUs reconfigured")):
        if result.get("capacity"):
            break  # a capacity search has no single timeline
        md.append("![%s](%s)" % (what, n))
        md.append("")
    md.append("Pods arrive at their creation time and leave at their deletion time; a pod that does not fit waits "
              "(FIFO, retried when resources free). See docs/whatif.md.")
    markdown = "\n".join(md) + "\n"

    def series(key):
        return [{"name": _label(r, runs), "points": [(pt["hour"], pt[key]) for pt in r["curve"]]} for r in runs]

    pictures = dict(cap_pics) if result.get("capacity") else {
        names[0]: svg.line_chart(series("held_gpus"), "GPUs held over time", "hours since the first arrival",
                                 "GPUs with a pod or reconfiguring"),
        names[1]: svg.line_chart(series("pending_pods"), "Pods pending over time", "hours since the first arrival",
                                 "pods pending"),
        names[2]: svg.line_chart(series("reconfigured_gpus"), "GPUs reconfigured so far", "hours since the first arrival",
                                 "GPUs reconfigured"),
    }
    return markdown, pictures
