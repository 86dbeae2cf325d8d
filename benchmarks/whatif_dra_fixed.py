# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""dra-first-fit vs dra-steered at one fixed size per seed (the same node sample), no target: served % and GPU-hours
held, paired (docs/whatif.md, "Dynamic MIG through DRA").

    python benchmarks/whatif_dra_fixed.py GPUS SEEDS     # e.g. 200 5 (seeds 42..)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402,F401  (the collection path; trace_dir)
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity, load, prepare, runner, stats, timed  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine  # noqa: E402

G = int(sys.argv[1])
seeds = list(range(42, 42 + int(sys.argv[2])))
csv = whatif_sweep.trace_dir(None)
base = {"nodes_csv": os.path.join(csv, "openb_node_list_gpu_node.csv"),
        "pods_csv": os.path.join(csv, "openb_pod_list_default.csv"),
        "departures": True, "inflation": 0.0, "window": "active", "load_factor": 4.0, "scoring": ["kube-default"],
        "seeds": seeds, "capacity_search": {"served_pct": 99}, "sharing": ["dra-first-fit", "dra-steered"]}
p = runner.normalise(base)
nodes_all, pods = runner.load_inputs(p)
full = whatif_engine.Cluster(nodes_all)
res = {"dra-first-fit": [], "dra-steered": []}
for seed in seeds:
    order = load.nested_order(nodes_all, seed)
    seq, rng0, dummy_a, dummy_r = prepare.arrivals_for(pods, full.total_milli, p, seed)
    seq, end = load.retime(seq, p["window"], p["load_factor"])
    k = load.prefix_for(order, G)
    for sh in res:
        pr = capacity.Prober(p, pods, order, seq, end, rng0.getstate(), sh, "kube-default", {}, timed.build)
        s = pr.summary(k)
        res[sh].append({"served_pct": s["served_pct"], "served_pods_pct": s["served_pods_pct"],
                        "gpu_hours_held": s["gpu_hours_held"], "pending_p95_s": s["pending_p95_s"], "gpus": pr.gpus(k)})
        print(seed, sh, res[sh][-1])
        sys.stdout.flush()
d = stats.paired(res, "dra-first-fit", ("served_pct", "served_pods_pct", "gpu_hours_held", "pending_p95_s"),
                 relative=("gpu_hours_held",))["dra-steered"]
for f, ci in d.items():
    print("steered - first-fit", f, stats.fmt(ci), ci["verdict"])
