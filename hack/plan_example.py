# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Regenerate the worked example of docs/planning.md: the plan of playbooks/files/plan-demand.yml, its pictures in
docs/img/plan-example-*.svg and the Markdown report in .build/plan-example/plan.md (printed summary and text diagram).

    .venv/bin/python hack/plan_example.py
"""
import os
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, ".build", "collections"))

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import report, solver  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.report import writer  # noqa: E402


def main():
    with open(os.path.join(TOP, "playbooks", "files", "plan-demand.yml")) as f:
        data = yaml.safe_load(f)
    result = solver.plan({"nodes": data["nodes"], "demand": data["demand"]})
    planned = result.pop("_planned_gpus")
    markdown, pictures = report.render(result, planned, "Worked example: playbooks/files/plan-demand.yml")
    writer.write_report(os.path.join(TOP, ".build", "plan-example"), markdown, pictures, default_name="plan.md")
    for name, text in pictures.items():
        with open(os.path.join(TOP, "docs", "img", name.replace("plan-", "plan-example-")), "w") as f:
            f.write(text)
    s = result["summary"]
    for key in ("gpus_used", "gpus_total", "cost_per_hour", "lower_bound_gpus", "lower_bound_cost_per_hour",
                "allocation_pct", "reconfigured_gpus", "one_gpu_per_replica", "gpus_saved_pct", "cost_saved_pct"):
        print("%s: %s" % (key, s[key]))
    print(s["slice_diagram"])
    print(yaml.safe_dump({"quotas": result["quotas"], "node_configs": result["node_configs"]}, sort_keys=True))


if __name__ == "__main__":
    main()
