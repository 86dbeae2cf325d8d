# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The strategies of docs/whatif.md ("Strategies of the replay with departures"), paired over seeds: default
workload, window active, load factor 4, a 150-GPU nested sample, kube-default, seeds 42..44.

    python benchmarks/whatif_strategies.py [START]   # START: skip the first START configurations

Prints per configuration the per-seed values, then the paired differences (mean ± stdev over seeds, and each
seed's) of each strategy against its baseline. About 7 minutes on the 2-core development machine.
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner  # noqa: E402

D = os.path.join(whatif_sweep.trace_dir(None), '')
SEEDS = [42, 43, 44]
base = {"nodes_csv": D + "openb_node_list_gpu_node.csv", "pods_csv": D + "openb_pod_list_default.csv",
        "departures": True, "inflation": 0.0, "window": "active", "load_factor": 4.0, "cluster_gpus": 150,
        "scoring": ["kube-default"], "seeds": SEEDS, "mig_shape": "a100_80gb"}
CONFIGS = [
    ("exclusive", {"sharing": ["exclusive"]}),
    ("exclusive+priorities", {"sharing": ["exclusive"], "priorities": "default"}),
    ("exclusive+autoscaler", {"sharing": ["exclusive"], "autoscaler": {}}),
    ("planned p95", {"sharing": ["planned"]}),
    ("hindsight", {"sharing": ["hindsight"]}),
    ("replanned gpu", {"sharing": ["replanned"]}),
    ("replanned node requeue", {"sharing": ["replanned"], "replan_scope": "node", "replan_drain": "requeue"}),
    ("replanned node wait", {"sharing": ["replanned"], "replan_scope": "node", "replan_drain": "wait"}),
]
F = ("served_pct", "served_pods_pct", "gpu_hours_held", "gpu_hours_provisioned", "utilisation_pct", "pods_never_placed",
     "pending_p95_s")
res = {}
START = int(sys.argv[1]) if len(sys.argv) > 1 else 0
for name, extra in CONFIGS[START:]:
    t = time.time()
    out = runner.run(dict(base, **extra))
    s = out["runs"][0]["summary"]
    per = s["per_seed"]
    res[name] = per
    line = {f: [x.get(f) for x in per] for f in F}
    for f in ("evictions", "scale_ups", "drain_evictions", "drain_wait_s", "reconfigured_gpus"):
        if f in per[0]:
            line[f] = [x[f] for x in per]
    if "by_priority" in per[0]:
        line["by_priority_served"] = [dict((k, v["served_pct"]) for k, v in x["by_priority"].items()) for x in per]
    if "by_class" in per[0]:
        line["by_class_served"] = [dict((k, v["served_pct"]) for k, v in x["by_class"].items()
                                        if k.startswith(("qos", "priority", "short", "shared"))) for x in per]
    if "planned_for" in per[0]:
        line["planned_for"] = [x["planned_for"]["demand"] for x in per]
    print("%s (%.0f s): %s" % (name, time.time() - t, json.dumps(line)))
    sys.stdout.flush()


def paired(a, b, f):
    """Mean ± stdev over seeds of b - a (GPU-hours: relative, %), and each seed's difference."""
    rel = f.startswith("gpu_hours")
    d = [(y[f] - x[f]) / x[f] * 100.0 if rel else y[f] - x[f] for x, y in zip(res[a], res[b])]
    unit = " %" if rel else " pp" if f.endswith("pct") else ""
    return "%+.2f%s ± %.2f (per seed %s)" % (statistics.mean(d), unit, statistics.stdev(d),
                                             ", ".join("%+.2f" % v for v in d))


if START:
    sys.exit(0)
for a, b in (("exclusive", "exclusive+priorities"), ("exclusive", "exclusive+autoscaler"), ("exclusive", "planned p95"),
             ("planned p95", "hindsight"), ("exclusive", "replanned gpu"), ("replanned gpu", "replanned node requeue"),
             ("replanned gpu", "replanned node wait")):
    print("%s -> %s:" % (a, b))
    for f in ("served_pct", "served_pods_pct", "gpu_hours_held", "gpu_hours_provisioned", "utilisation_pct"):
        print("   %-22s %s" % (f, paired(a, b, f)))
