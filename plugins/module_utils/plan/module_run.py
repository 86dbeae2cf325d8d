# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gpu_plan``'s one call: parse the module's params once, plan through the typed API, write the report.

The module ends through ``common.module_exit.run_and_exit`` like the other thin modules (the diff only when the task
asks for one). Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import report, solver
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import nodes_diff, parse_request
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer


def run(params: Mapping[str, Any], check_mode: bool = False, diff: bool = False) -> Dict[str, Any]:
    """The module result: ``plan`` (the typed result as a dict), ``report`` (what was written, or None), ``changed``
    (the report changed; a plan alone changes nothing) and, with ``diff``, ``diff`` (the nodes' configs before/after,
    then the report's Markdown)."""
    plan = solver.plan(parse_request(params))
    result = plan.as_dict()
    diffs = [nodes_diff(params["nodes"], result)] if diff else []
    written = None
    if params.get("report"):
        markdown, pictures = report.render(result, plan.planned_gpus, params.get("report_title"))
        written, report_diff = writer.write_report_diff(params["report"], markdown, pictures, check_mode=check_mode,
                                                        diff=diff, default_name=report.DEFAULT_NAME)
        if report_diff:
            diffs.append(report_diff)
    out: Dict[str, Any] = {"changed": bool(written and written["changed"]), "plan": result, "report": written}
    if diffs:
        out["diff"] = diffs
    return out
