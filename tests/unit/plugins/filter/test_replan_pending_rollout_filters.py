# -*- coding: utf-8 -*-
"""Filters gpu_pending_demand, gpu_replan_nodes and gpu_replan_rollout (the closed loop's playbook side), each on
a small hand-worked case through the filter itself, and their errors as AnsibleFilterError."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter.gpu_pending_demand import FilterModule as PendingFilters
from ansible_collections.gpuops.k8s.plugins.filter.gpu_pending_demand import gpu_pending_demand
from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_nodes import FilterModule as NodesFilters
from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_nodes import gpu_replan_nodes
from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_rollout import FilterModule as RolloutFilters
from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_rollout import gpu_replan_rollout

MIG1 = "nvidia.com/mig-1g.10gb"
SHARED = "nvidia.com/gpu.shared"


def pod(name, ns, resources, phase="Pending", message=None, owner=None, node=None, labels=None):
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
    status = {"phase": phase}
    if message:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": message, "lastTransitionTime": "2026-12-07T10:00:00Z"}]
    spec = {"containers": [{"name": "c", "resources": {"limits": resources}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": status}


def _pods():
    rs = ("ReplicaSet", "llm-7d9f8")
    return [pod("llm-7d9f8-r0", "team-a", {MIG1: "1"}, phase="Running", owner=rs, node="n1"),
            pod("llm-7d9f8-p0", "team-a", {MIG1: "1"}, message="0/2 nodes are available: 2 Insufficient %s." % MIG1,
                owner=rs),
            pod("llm-7d9f8-p1", "team-a", {MIG1: "1"}, message="0/2 nodes are available: 2 Insufficient %s." % MIG1,
                owner=rs),
            pod("nb-0", "team-b", {SHARED: "1"}, message="0/2 nodes are available: 2 Insufficient %s." % SHARED,
                owner=("StatefulSet", "nb")),
            pod("etl-0", "team-a", {"nvidia.com/gpu": "1"}, message="0/2 nodes are available: 2 Insufficient cpu.",
                owner=("Job", "etl")),
            pod("web-0", "team-a", {"cpu": "1"}, phase="Running", owner=("ReplicaSet", "web-5c"), node="n2")]


def test_pending_demand_new_items_sized_for_the_requested_resource():
    # llm: 1 running + 2 pending pods of Deployment llm asking for a 1g.10gb (1 of 7 compute slices, 10 GB): a new
    # item of 3 replicas, memory 10, compute 1/7 = 0.142857 floored to 0.1428; nb: a gpu.shared pod, memory from
    # shared_memory_gb (12); etl pends for CPU only: ignored with the scheduler's message; web holds no GPU.
    nodes = [{"metadata": {"name": "n1"}, "spec": {}, "status": {"allocatable": {MIG1: "7"}}}]
    out = gpu_pending_demand(_pods(), nodes=nodes, shared_memory_gb=12)
    assert out["demand"] == [
        {"tenant": "team-a", "name": "llm", "replicas": 3, "memory_gb": 10.0, "compute": 0.1428, "isolation": "strict",
         "kind": "inference", "resource": MIG1},
        {"tenant": "team-b", "name": "nb", "replicas": 1, "memory_gb": 12.0, "isolation": "shared", "kind": "inference",
         "resource": SHARED}]
    changes = [(c["tenant"], c["name"], c["field"]) for c in out["changes"]]
    assert changes == [("team-a", "llm", "item"), ("team-b", "nb", "item")]
    assert out["ignored"] == [{"namespace": "team-a", "name": "etl-0", "reason": "unschedulable for another reason "
                               "than its GPU resource: 0/2 nodes are available: 2 Insufficient cpu."}]
    assert out["busy_nodes"] == {"n1": 1} and out["changed"] is True
    assert out["resources"] == {
        MIG1: {"pending_pods": 2, "requested": 2, "offered": 7,
               "why": "the 7 %s the schedulable nodes offer are taken" % MIG1},
        SHARED: {"pending_pods": 1, "requested": 1, "offered": 0, "why": "no schedulable node offers %s" % SHARED}}
    assert sorted((p["namespace"], p["name"], p["item"]["name"]) for p in out["pending"]) == [
        ("team-a", "llm-7d9f8-p0", "llm"), ("team-a", "llm-7d9f8-p1", "llm"), ("team-b", "nb-0", "nb")]


def test_pending_demand_raises_a_declared_items_replicas():
    demand = [{"tenant": "team-a", "name": "llm", "replicas": 1, "memory_gb": 9, "kind": "inference",
               "isolation": "strict"}]
    out = gpu_pending_demand(_pods()[:3], demand=demand)
    assert out["demand"] == [dict(demand[0], replicas=3)]  # 1 running + 2 pending
    assert out["changes"] == [{"tenant": "team-a", "name": "llm", "field": "replicas", "before": 1, "after": 3,
                               "reason": "2 pending pod(s) and 1 running: 3 replicas wanted, 1 declared"}]
    assert demand[0]["replicas"] == 1  # the input is not changed


def test_pending_demand_errors_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match="^gpu_pending_demand: pods must be a list"):
        gpu_pending_demand({"resources": []})
    with pytest.raises(AnsibleFilterError, match="^gpu_pending_demand: .*min_pending_s"):
        gpu_pending_demand([], min_pending_s=-5)
    assert PendingFilters().filters() == {"gpu_pending_demand": gpu_pending_demand}


def test_replan_nodes_take_the_live_label_else_current_else_all_disabled_and_the_busy_count():
    nodes = [{"name": "n1", "gpus": [{"model": "a100_80gb", "count": 2}], "current": "all-1g.10gb"},
             {"name": "n2", "gpus": [{"model": "a100_80gb", "count": 2}]},
             {"name": "n3", "gpus": [{"model": "a100_80gb", "count": 2}], "current": "all-3g.40gb"}]
    k8s = [{"metadata": {"name": "n1", "labels": {"nvidia.com/mig.config": "plan-n1"}}},
           {"metadata": {"name": "n3", "labels": {"kubernetes.io/hostname": "n3"}}}]
    out = gpu_replan_nodes(nodes, k8s, {"n1": 2, "n9": 4})
    assert [(n["name"], n["current"], n["busy"]) for n in out] == [
        ("n1", "plan-n1", 2), ("n2", "all-disabled", 0), ("n3", "all-3g.40gb", 0)]
    assert out[0]["gpus"] == nodes[0]["gpus"] and nodes[0]["current"] == "all-1g.10gb" and "busy" not in nodes[0]
    assert [n["current"] for n in gpu_replan_nodes(nodes)] == ["all-1g.10gb", "all-disabled", "all-3g.40gb"]
    with pytest.raises(AnsibleFilterError, match="^gpu_replan_nodes: nodes must be gpu_plan's node list"):
        gpu_replan_nodes("n1")
    assert NodesFilters().filters() == {"gpu_replan_nodes": gpu_replan_nodes}


def test_replan_rollout_per_node_budgets_bare_pods_and_daemonsets():
    # nodes a, b, c change, d keeps its layout. PDB serve/chat allows 1: a runs 1 chat pod (rolls), b runs 2
    # (deferred); c runs a bare pod (deferred: the drain would delete it) and a finished chat pod and a DaemonSet
    # pod with chat's labels, neither of which counts. d's pods are not looked at.
    plan = {"plan": {"node_configs": [{"node": n, "mig_config": "cfg-" + n, "mig_config_changed": n != "d"}
                                      for n in "abcd"]}}
    rs, chat = ("ReplicaSet", "chat-6f"), {"app": "chat"}
    pods = [pod("chat-1", "serve", {MIG1: "1"}, phase="Running", owner=rs, node="a", labels=chat),
            pod("chat-2", "serve", {MIG1: "1"}, phase="Running", owner=rs, node="b", labels=chat),
            pod("chat-3", "serve", {MIG1: "1"}, phase="Running", owner=rs, node="b", labels=chat),
            pod("debug", "serve", {MIG1: "1"}, phase="Running", node="c"),
            pod("chat-0", "serve", {MIG1: "1"}, phase="Succeeded", owner=rs, node="c", labels=chat),
            pod("exporter", "serve", {}, phase="Running", owner=("DaemonSet", "exp"), node="c", labels=chat),
            pod("chat-4", "serve", {MIG1: "1"}, phase="Running", owner=rs, node="d", labels=chat),
            pod("chat-5", "serve", {MIG1: "1"}, phase="Running", owner=rs, node="d", labels=chat)]
    pdbs = [{"metadata": {"name": "chat", "namespace": "serve"}, "spec": {"selector": {"matchLabels": chat}},
             "status": {"disruptionsAllowed": 1}}]
    out = gpu_replan_rollout(plan, pods, pdbs)
    assert out["roll"] == ["a"] and out["changed"] == {"a": "cfg-a", "b": "cfg-b", "c": "cfg-c"}
    assert out["deferred"] == [
        {"node": "b", "mig_config": "cfg-b", "reason": "left for the next round: PodDisruptionBudget serve/chat allows "
         "1 disruption(s); the drain would evict 2 of its pods (serve/chat-2, serve/chat-3)"},
        {"node": "c", "mig_config": "cfg-c", "reason": "left for the next round: pod serve/debug has no controller: "
         "the drain would delete it, not evict it"}]
    assert gpu_replan_rollout(plan, pods[:1])["roll"] == ["a", "b", "c"]  # no PDBs, no bare pod
    with pytest.raises(AnsibleFilterError, match="^gpu_replan_rollout: plan must be a gpu_plan result"):
        gpu_replan_rollout({"decisions": []}, pods)
    with pytest.raises(AnsibleFilterError, match="^gpu_replan_rollout: pods must be a list"):
        gpu_replan_rollout(plan, {"items": pods})
    assert RolloutFilters().filters() == {"gpu_replan_rollout": gpu_replan_rollout}
