# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan report: Markdown plus SVG pictures (module_utils/report, the what-if report's style).

Pictures: the planned slice layout of one node per distinct (MIG config, device-plugin config) - up to
:data:`MAX_DIAGRAM_NODES` - (``plan-slices.svg``), GPUs used and allocation per model (``plan-utilisation.svg``),
and GPUs and cost per hour of the plan against one GPU per replica and the whole fleet (``plan-cost.svg``).
Deterministic: no timestamps or timings, so a second run with the same inputs writes nothing.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.report import slices, svg, writer

PICTURES = ("plan-slices.svg", "plan-utilisation.svg", "plan-cost.svg")
MAX_DIAGRAM_NODES = 8
DEFAULT_NAME = "plan.md"


def _rows_for_report(result, facts_by_node):
    groups = OrderedDict()
    for nc in result["node_configs"]:
        if not nc["gpus_used"]:
            continue
        groups.setdefault((nc["mig_config"], nc["device_plugin_config"]), []).append(nc["node"])
    shares = {}
    for pl in result["placements"]:
        if pl["slice"] in ("shared", "whole"):
            shares.setdefault((pl["node"], pl["gpu"]), []).append(
                "%s x%d" % (pl["name"], pl["replicas"]) if pl["slice"] == "shared" else pl["name"])
    rows = []
    for key in list(groups)[:MAX_DIAGRAM_NODES]:
        members = groups[key]
        node = members[0]
        head = node if len(members) == 1 else "%s (and %d more nodes like it)" % (node, len(members) - 1)
        rows.append({"separator": "%s - %s, %s" % (head, key[0] or "no MIG", key[1])})
        for gpu in facts_by_node.get(node, []):
            rows.append(slices.gpu_row(gpu, shares=shares.get((node, gpu["index"]))))
    return rows, len(groups)


def render(result: Mapping[str, Any], facts_by_node: Mapping[str, List[Dict[str, Any]]],
           title: Optional[str] = None) -> Tuple[str, Dict[str, str]]:
    """``(markdown, {picture: svg})`` of a plan (the module's ``plan``); ``facts_by_node`` the planned GPU facts."""
    s = result["summary"]
    title = title or "GPU fleet plan"
    md = ["# %s" % title, ""]
    md.append("Objective `%s`, solver `%s` (%s). %d of %d GPUs used, %s USD per hour; one GPU per replica would "
              "take %d GPUs and %s USD per hour (%s %% fewer GPUs, %s %% less cost)."
              % (s["objective"], s["solver"], s["status"], s["gpus_used"], s["gpus_total"], s["cost_per_hour"],
                 s["one_gpu_per_replica"]["gpus"], s["one_gpu_per_replica"]["cost_per_hour"], s["gpus_saved_pct"],
                 s["cost_saved_pct"]))
    md.append("")
    md.append(writer.table(
        ["GPUs used", "lower bound", "gap", "cost/h", "bound cost/h", "allocation", "reconfigured GPUs",
         "replicas placed", "unplaced"],
        [[s["gpus_used"], "%s (%s)" % (s["lower_bound_gpus"], s["lower_bound"]), "%s %%" % s["gap_pct"],
          s["cost_per_hour"], s["lower_bound_cost_per_hour"] if s["lower_bound_cost_per_hour"] is not None else "n/a",
          "%s %%" % s["allocation_pct"], "%s%s" % (s["reconfigured_gpus"], "" if s["disruption_budget"] is None
                                                   else " (budget %s)" % s["disruption_budget"]),
          "%d of %d" % (s["replicas_placed"], s["replicas_requested"]), s["replicas_unplaced"]]],
        ["r", "r", "r", "r", "r", "r", "r", "r", "r"]))
    md.append("![planned slices](%s)" % PICTURES[0])
    md.append("")
    md.append("![utilisation per model](%s) ![cost](%s)" % (PICTURES[1], PICTURES[2]))
    md.append("")
    md.append("## Decisions")
    md.append("")
    md.append(writer.table(["tenant", "name", "replicas", "placed", "mode", "resource", "model", "why"],
                           [[d["tenant"], d["name"], d["replicas"], d["placed"], d["mode"] or "-", d["resource"] or "-",
                             ", ".join("%s x%d" % (b["model"], b["replicas"]) for b in d["by_model"]) or "-",
                             d["reason"]] for d in result["decisions"]]))
    if result["unplaced"]:
        md.append("## Unplaced")
        md.append("")
        md.append(writer.table(["tenant", "name", "replicas", "reason"],
                               [[u["tenant"], u["name"], u["replicas"], u["reason"]] for u in result["unplaced"]]))
    md.append("## Per model")
    md.append("")
    md.append(writer.table(["model", "GPUs", "used", "allocation", "cost/h"],
                           [[k, v["gpus"], v["gpus_used"], "%s %%" % v["allocation_pct"], v["cost_per_hour"]]
                            for k, v in s["by_model"].items()], ["l", "r", "r", "r", "r"]))
    md.append("## Nodes")
    md.append("")
    md.append(writer.table(["node", "GPUs used", "sharing", "mig config", "device-plugin config"],
                           [[n["node"], "%d/%d" % (n["gpus_used"], n["gpus"]), n["sharing"], n["mig_config"] or "-",
                             n["device_plugin_config"] or "-"] for n in result["node_configs"][:200]]))
    if len(result["node_configs"]) > 200:
        md.append("... and %d more nodes (see the module result)." % (len(result["node_configs"]) - 200))
        md.append("")
    md.append("## Quotas")
    md.append("")
    md.append("```json\n%s\n```\n" % json.dumps(result["quotas"], indent=2, sort_keys=True))
    md.append("## mig-parted config")
    md.append("")
    md.append("```json\n%s\n```\n" % json.dumps(result["mig_parted_config"], indent=2, sort_keys=True))
    rows, groups = _rows_for_report(result, facts_by_node)
    pictures = {}
    pictures[PICTURES[0]] = svg.slice_diagram(rows or [{"separator": "no GPU used"}],
                                              "Planned layouts (one node per distinct config, %d of %d)"
                                              % (min(groups, MAX_DIAGRAM_NODES), groups))
    models = [k for k, v in s["by_model"].items() if v["gpus"]]
    pictures[PICTURES[1]] = svg.bar_chart(
        models, [{"name": "GPUs in the fleet", "values": [s["by_model"][k]["gpus"] for k in models]},
                 {"name": "GPUs used", "values": [s["by_model"][k]["gpus_used"] for k in models]},
                 {"name": "allocation %", "values": [s["by_model"][k]["allocation_pct"] for k in models]}],
        "GPUs and allocation per model", "GPUs / %")
    pictures[PICTURES[2]] = svg.bar_chart(
        ["GPUs", "USD per hour"],
        [{"name": "one GPU per replica", "values": [s["one_gpu_per_replica"]["gpus"],
                                                    s["one_gpu_per_replica"]["cost_per_hour"]]},
         {"name": "plan", "values": [s["gpus_used"], s["cost_per_hour"]]},
         {"name": "lower bound", "values": [s["lower_bound_gpus"], s["lower_bound_cost_per_hour"]]}],
        "Before / after: one GPU per replica vs the plan", "GPUs / USD per hour", value_format="%.1f")
    return "\n".join(md) + "\n", pictures
