# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The capacity part of the what-if report with departures: GPUs needed per strategy at the service target (a
table and a picture, ``whatif-capacity.svg``), the paired differences against the baseline, and the service by
class of pods. Deterministic (no timings).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.report import svg
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import stats

PICTURE = "whatif-capacity.svg"
CAP_HEADERS = ["strategy", "GPUs needed", "nodes", "met (seeds)", "USD / h", "utilisation %", "held %",
               "node-h held", "served % (GPU-time)", "served % (pods)", "start delay p95 (s)"]
CLASS_FIELDS = (("served_pct", "served %"), ("served_pods_pct", "pods served %"),
                ("start_delay_p95_s", "p95 start delay (s)"), ("pods_never_placed", "never placed"))


def _f(value, pattern="%.2f"):
    return "n/a" if value is None else pattern % value


def _sd(cap, field, pattern=" ± %.1f"):
    s = (cap.get("spread") or {}).get(field)
    return pattern % s["stdev"] if s else ""


def capacity_table(result: Mapping[str, Any]) -> str:
    rows = []
    for label, cap in result["capacity"].items():
        n = len(cap.get("per_seed") or [cap])
        rows.append([label, _f(cap["gpus"], "%.1f") + _sd(cap, "gpus"), _f(cap["nodes"], "%.1f"),
                     "%s (%d/%d)" % ("yes" if cap["met"] else "no", cap.get("met_seeds", int(cap["met"])), n),
                     _f(cap["usd_per_hour"], "%.2f"), _f(cap["utilisation_pct"]) + _sd(cap, "utilisation_pct"),
                     _f(cap["held_pct"]), _f(cap["node_hours_held"], "%.0f"), _f(cap["served_pct"], "%.3f"),
                     _f(cap["served_pods_pct"], "%.3f"), _f(cap["start_delay_p95_s"], "%.0f")])
    return writer.table(CAP_HEADERS, rows, ["l"] + ["r"] * (len(CAP_HEADERS) - 1))


def paired_table(paired: Mapping[str, Any], key: str) -> str:
    diffs = paired.get(key) or {}
    fields = []
    for row in diffs.values():
        for f in row:
            if f not in fields:
                fields.append(f)
    rows = [[label] + ["%s (%s)" % (stats.fmt(row[f]), row[f]["verdict"] or "n/a") if f in row else "n/a"
                       for f in fields] for label, row in diffs.items()]
    return writer.table(["vs %s" % paired["baseline"]] + fields, rows, ["l"] + ["r"] * len(fields))


def class_table(runs: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    classes = []
    for r in runs:
        for c in r["summary"].get("by_class") or {}:
            if c not in classes:
                classes.append(c)
    headers = ["class"] + ["%s: served %% / pods %%" % label for label in labels]
    rows = []
    for c in classes:
        row = [c]
        for r in runs:
            bc = (r["summary"].get("by_class") or {}).get(c)
            row.append("n/a" if not bc else "%s / %s" % (_f(bc["served_pct"], "%.2f"), _f(bc["served_pods_pct"], "%.2f")))
        rows.append(row)
    return writer.table(headers, rows, ["l"] + ["r"] * len(labels))


def picture(result: Mapping[str, Any], title: Optional[str] = None) -> str:
    caps = result["capacity"]
    labels = list(caps)
    return svg.bar_chart(labels, [{"name": "GPUs needed (mean over seeds)", "values": [caps[k]["gpus"] for k in labels]}],
                         title or "GPUs needed at the service target, per strategy", "GPUs")


def render(result: Mapping[str, Any], labels: Sequence[str], prefix: str = "") -> Tuple[List[str], Dict[str, str]]:
    """``(markdown lines, {picture: svg})`` of the capacity part (empty without ``capacity``)."""
    md = []
    pics = {}
    if result.get("capacity"):
        t = result["target"]
        md += ["## GPUs needed at the service target", "",
               "Target: %s. Fewest GPUs of the nested node samples per seed (bisection); utilisation = requested / "
               "provisioned GPU-time over the window; held = GPUs with a pod over provisioned." % ", ".join(
                   "%s %s %g" % (k, "<=" if k != "served_pct" else ">=", v) for k, v in sorted(t.items())), "",
               capacity_table(result).rstrip("\n"), "", "![GPUs needed](%s%s)" % (prefix, PICTURE), ""]
        pics[prefix + PICTURE] = picture(result)
    paired = result.get("paired")
    if paired:
        md += ["## Paired differences against %s (mean [95 %% CI] over the seeds)" % paired["baseline"], ""]
        if paired.get("capacity"):
            md += [paired_table(paired, "capacity").rstrip("\n"), ""]
        md += [paired_table(paired, "differences").rstrip("\n"), "",
               "*none*: the interval holds 0 (inside the noise).", ""]
    if any(r["summary"].get("by_class") for r in result["runs"]):
        md += ["## Service by class of pods", "", class_table(result["runs"], labels).rstrip("\n"), "",
               "Classes: whole / shared / multi-gpu / cpu (GPU shape), short (< 1 h) / long (life in the trace), "
               "qos:<value> (the trace's priority class); served % by GPU-time / by pod count.", ""]
    return md, pics
