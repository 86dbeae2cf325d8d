# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `planned` row of docs/whatif.md: gpu_plan's layouts for the trace's own demand, replayed by gpu_whatif.

    python benchmarks/whatif_planned.py [--trace DIR] [--inflation 1.3] [--seed 42]

The trace's GPUs cannot do MIG, so, as for the static `mig` rows, every GPU takes the A100 80GB geometry
(``mig_shape: a100_80gb``). The demand handed to gpu_plan is the trace itself: its sharing pods grouped by
``gpu_milli`` (one demand item per share, ``memory_gb`` = the share of 80 GB, strict isolation so that MIG
or a whole GPU serves them), its whole-GPU pods by GPU count (whole GPUs), each count scaled by the
inflation the replay uses. gpu_plan (``objective: min_gpus``, heuristic solver) lays out the fleet; the
what-if replays the trace on those layouts (``sharing: planned``) next to ``exclusive``, ``fractional`` and
the static all-balanced ``mig``, under kube-default and FGD scoring. Prints one row per run and the times.
"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whatif_sweep  # noqa: E402  (sets up the collection path; trace_dir)

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import solver  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner  # noqa: E402

A100 = "NVIDIA A100-SXM4-80GB"
STATIC = {"*": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}}  # all-balanced on every GPU


def demand_of(pods, inflation):
    """gpu_plan demand items from the trace's GPU pods (counts scaled by the inflation)."""
    shares = collections.Counter(p.gpu_milli for p in pods if p.num_gpu == 1 and p.gpu_milli < 1000)
    whole = collections.Counter(p.num_gpu for p in pods if p.num_gpu >= 1 and p.gpu_milli >= 1000)
    items = []
    for milli, count in sorted(shares.items()):
        items.append({"tenant": "trace", "name": "share-%04d" % milli, "replicas": int(round(count * inflation)),
                      "memory_gb": round(80.0 * milli / 1000.0, 2), "compute": milli / 1000.0,
                      "kind": "inference", "isolation": "strict"})
    for ngpu, count in sorted(whole.items()):
        items.append({"tenant": "trace", "name": "whole-%d" % ngpu, "replicas": int(round(count * inflation)),
                      "memory_gb": 80, "kind": "training", "isolation": "strict", "gpus_per_replica": ngpu})
    return items


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--trace")
    ap.add_argument("--inflation", type=float, default=1.3)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)
    csv_dir = whatif_sweep.trace_dir(args.trace)
    params = {"nodes_csv": os.path.join(csv_dir, "openb_node_list_gpu_node.csv"),
              "pods_csv": os.path.join(csv_dir, "openb_pod_list_default.csv"),
              "inflation": args.inflation, "seed": args.seed, "mig_shape": "a100_80gb"}
    nodes, pods = runner.load_inputs(runner.normalise(dict(params, scoring=["kube-default"], sharing=["exclusive"])))
    plan_nodes = [{"name": n.name, "gpus": [{"model": A100, "count": n.gpus}]} for n in nodes if n.gpus]
    items = demand_of(pods, args.inflation)
    t0 = time.time()
    plan = solver.plan(plan_demand.parse_request({"nodes": plan_nodes, "demand": items, "objective": "min_gpus",
                                                  "solver": "heuristic"})).as_dict()
    plan_s = time.time() - t0
    s = plan["summary"]
    layouts = collections.Counter(c["mig_config"] for c in plan["node_configs"] if c.get("mig_config"))
    print("gpu_plan on %d nodes / %d GPUs, %d demand items (%d replicas): %.1f s, %d GPUs used, %d unplaced items, "
          "%d distinct node layouts" % (len(plan_nodes), sum(n.gpus for n in nodes), len(items),
                                        sum(i["replicas"] for i in items), plan_s, s["gpus_used"],
                                        len(plan["unplaced"]), len(layouts)))
    rows = [("exclusive", None), ("fractional", None), ("mig", STATIC), ("planned", None)]
    print("%-11s %-13s %10s %8s %12s %7s" % ("sharing", "scoring", "allocated", "served", "unscheduled", "time"))
    for sharing, mig_config in rows:
        for scoring in ("kube-default", "fgd"):
            run = dict(params, scoring=[scoring], sharing=[sharing])
            if sharing == "mig":
                run.update(mig_config=mig_config)
            if sharing == "planned":
                run.update(plan=plan)
            t1 = time.time()
            out = runner.run(run)
            summary = out["runs"][0]["summary"]
            print("%-11s %-13s %9.2f%% %7.2f%% %12d %6.1fs" % (
                sharing, scoring, summary["allocated_pct_at_100"], summary["served_pct_at_100"],
                summary["unscheduled_pods_at_100"], time.time() - t1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
