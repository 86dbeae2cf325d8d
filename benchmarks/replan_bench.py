# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`make bench-replan`: one closed-loop re-plan (playbooks/replan.yml's controller work) on a 1,000-GPU fleet with
200 pending GPU pods, timed step by step in-process (no cluster: the Kubernetes objects are generated).

The fleet and demand are plan_bench.py's (8-GPU nodes of A100 40/80GB, H100, H200, L40S; the ``mixed`` demand). A
first plan sets every node's current layout (its mig.config name and the plan's mig-parted file as current_configs);
the replicas it placed run as pods (labelled with their demand item, spread over the nodes, 1 in 3 behind a
PodDisruptionBudget that allows no disruption). Then 200 pods of new workloads go pending (3g.40gb, 2g.20gb, 1g.10gb
slices and whole GPUs, with the scheduler's Insufficient message), and the re-plan runs as replan.yml runs it:
gpu_pending_demand -> gpu_replan_nodes -> gpu_plan (solver auto: LP rounding + heuristic at this size; current
configs; disruption budget) -> gpu_replan_rollout. Printed: seconds per step and in total, what the re-plan changed
(GPUs reconfigured within the budget, nodes to roll, nodes deferred by a PDB, pending replicas placed), and the target
(under 10 s on the controller) as met or not met.
"""
import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plan_bench  # noqa: E402  (puts the collection on sys.path)

from ansible_collections.gpuops.k8s.plugins.module_utils.plan import pending, replan, solver  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import workloads  # noqa: E402

TARGET_S = 10.0
PENDING_SHAPES = [("nvidia.com/mig-3g.40gb", 1), ("nvidia.com/mig-2g.20gb", 1), ("nvidia.com/mig-1g.10gb", 1),
                  ("nvidia.com/gpu", 1), ("nvidia.com/gpu", 2)]


def _pod(ns, name, owner, resource, count, phase, node=None, labels=None, message=None):
    meta = {"namespace": ns, "name": name, "labels": labels or {},
            "ownerReferences": [{"kind": "ReplicaSet", "name": owner}]}
    status = {"phase": phase}
    if message:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": message, "lastTransitionTime": "2026-12-06T12:00:00Z"}]
    spec = {"containers": [{"name": "main", "resources": {"limits": {resource: str(count)}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": status}


def scene(gpus, n_pending, seed):
    rng = random.Random(seed)
    nodes = plan_bench.fleet(gpus)
    demand = plan_bench.demand("mixed", gpus)
    first = solver.plan(plan_demand.parse_request({"nodes": nodes, "demand": demand, "solver": "heuristic",
                                                   "bound": False})).as_dict()
    current = dict((n["node"], n["mig_config"]) for n in first["node_configs"] if n.get("mig_config"))
    for n in nodes:
        if n["name"] in current:
            n["current"] = current[n["name"]]
    # what the first plan placed runs: pods labelled with their item, on random nodes
    pods, pdbs = [], []
    names = [n["name"] for n in nodes]
    for d in first["decisions"]:
        placed = d.get("placed", 0)
        res = d.get("resource") or "nvidia.com/gpu"
        labels = workloads.pod_labels(d["tenant"], d["name"])
        for r in range(int(placed or 0)):
            pods.append(_pod(d["tenant"], "%s-7c9f8-%05d" % (d["name"], r), d["name"] + "-7c9f8", res,
                             d.get("gpus_per_replica", 1) if res == "nvidia.com/gpu" else 1, "Running",
                             node=rng.choice(names), labels=labels))
        if rng.random() < 1 / 3.0:
            pdbs.append({"metadata": {"namespace": d["tenant"], "name": d["name"]},
                         "spec": {"selector": {"matchLabels": labels}}, "status": {"disruptionsAllowed": 0}})
    for i in range(n_pending):
        res, count = PENDING_SHAPES[i % len(PENDING_SHAPES)]
        ns, wl = "burst-%d" % (i % 10), "svc-%d" % (i % 40)
        pods.append(_pod(ns, "%s-6d8f7-%05d" % (wl, i), wl + "-6d8f7", res, count, "Pending",
                         message="0/%d nodes are available: %d Insufficient %s." % (len(nodes), len(nodes), res)))
    k8s_nodes = [{"metadata": {"name": n["name"], "labels": {"nvidia.com/mig.config": n.get("current", "all-disabled")}},
                  "status": {"allocatable": {}}} for n in nodes]
    return nodes, demand, first, pods, pdbs, k8s_nodes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--gpus", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=200)
    ap.add_argument("--budget", type=int, default=32, help="disruption budget (GPUs) of the re-plan")
    ap.add_argument("--seed", type=int, default=5)
    a = ap.parse_args()
    t = time.time()
    nodes, demand, first, pods, pdbs, k8s_nodes = scene(a.gpus, a.pending, a.seed)
    print("scene: %d GPUs on %d nodes, %d demand items, %d running pods, %d pending pods, %d PDBs (%.1f s to build)"
          % (a.gpus, len(nodes), len(demand), sum(1 for p in pods if p["status"]["phase"] == "Running"), a.pending,
             len(pdbs), time.time() - t))
    steps = []
    t0 = time.time()
    t = time.time()
    pend = pending.pending_demand(pods, demand=demand, nodes=k8s_nodes)
    steps.append(("gpu_pending_demand", time.time() - t))
    t = time.time()
    plan_nodes = replan.planner_nodes(nodes, k8s_nodes, pend["busy_nodes"])
    steps.append(("gpu_replan_nodes", time.time() - t))
    t = time.time()
    plan = solver.plan(plan_demand.parse_request({
        "nodes": plan_nodes, "demand": pend["demand"], "disruption_budget": a.budget,
        "current_configs": first["mig_parted_config"], "solver": "auto", "time_limit_s": 30})).as_dict()
    steps.append(("gpu_plan (auto: %s, %s)" % (plan["summary"]["solver"], plan["summary"]["status"]), time.time() - t))
    t = time.time()
    guard = replan.rollout_guard(plan, pods, pdbs)
    steps.append(("gpu_replan_rollout", time.time() - t))
    total = time.time() - t0
    for name, s in steps:
        print("  %-34s %7.2f s" % (name, s))
    print("  %-34s %7.2f s" % ("total (controller)", total))
    s = plan["summary"]
    new_items = [c for c in pend["changes"] if c["field"] == "item"]
    new_keys = set((c["tenant"], c["name"]) for c in new_items)
    wanted = sum(c["after"]["replicas"] for c in new_items)
    unplaced_new = sum(u.get("replicas", 0) for u in plan["unplaced"] if (u.get("tenant"), u.get("name")) in new_keys)
    print("pending: %d pods -> %d new items (%d replicas); placed %d, unplaced %d" % (
        len(pend["pending"]), len(new_items), wanted, wanted - unplaced_new, unplaced_new))
    print("re-plan: %d of %d GPUs used, reconfigured GPUs %d (budget %d); nodes changing %d: roll %d, deferred %d (PDB)"
          % (s["gpus_used"], s["gpus_total"], s["reconfigured_gpus"], a.budget, len(guard["changed"]),
             len(guard["roll"]), len(guard["deferred"])))
    if guard["deferred"]:
        print("  e.g. %s: %s" % (guard["deferred"][0]["node"], guard["deferred"][0]["reason"][:160]))
    ok_budget = s["reconfigured_gpus"] <= a.budget
    print("target: re-plan of %d GPUs with %d pending pods under %.0f s: %.2f s - %s" % (
        a.gpus, a.pending, TARGET_S, total, "met" if total < TARGET_S else "NOT met"))
    print("target: GPUs reconfigured within the budget: %d <= %d - %s" % (
        s["reconfigured_gpus"], a.budget, "met" if ok_budget else "NOT met"))
    return 0 if total < TARGET_S and ok_budget else 1


if __name__ == "__main__":
    sys.exit(main())
