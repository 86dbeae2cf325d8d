# -*- coding: utf-8 -*-
"""The closed loop's pure parts: pending GPU pods -> demand (plan/pending.py), which changed nodes can roll
(plan/replan.py), and the two together with the real planner on a small fleet."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand, pending, replan, solver

A100 = "NVIDIA A100-SXM4-80GB"
NOW = 1_800_000_000.0


def plan_of(params):
    """gpu_plan's path: parameters parsed once, the typed call, the module's return value."""
    return solver.plan(plan_demand.parse_request(params)).as_dict()


def pod(name, ns="team-a", resources=None, phase="Pending", message=None, owner=("ReplicaSet", None), node=None,
        labels=None, since=NOW - 120, priority=None):
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1] or name.rsplit("-", 1)[0]}]
    status = {"phase": phase}
    if message is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": message, "lastTransitionTime": since}]
    spec = {"containers": [{"name": "main", "resources": {"limits": dict(resources or {})}}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": meta, "spec": spec, "status": status}


def mig_pod(name, profile="3g.40gb", **kw):
    res = "nvidia.com/mig-" + profile
    return pod(name, resources={res: "1"}, message="0/4 nodes are available: 4 Insufficient %s." % res, **kw)


def knode(name, alloc, unschedulable=False):
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable}, "status": {"allocatable": alloc}}


def test_classify_keeps_only_pods_waiting_for_their_gpu_resource():
    ok, facts = pending.classify(mig_pod("llm-7d9f8-abcde"), now=NOW)
    assert ok and facts["short"] == ["nvidia.com/mig-3g.40gb"] and facts["resources"] == {"nvidia.com/mig-3g.40gb": 1}
    cpu = pod("cpu-1", resources={"nvidia.com/gpu": 1}, message="0/4 nodes are available: 4 Insufficient cpu.")
    assert pending.classify(cpu, now=NOW) == (
        False, "unschedulable for another reason than its GPU resource: 0/4 nodes are available: 4 Insufficient cpu.")
    assert pending.classify(pod("web", resources={"cpu": "1"}, message="Insufficient cpu"), now=NOW) == (
        False, "requests no NVIDIA resource")
    assert pending.classify(pod("fresh", resources={"nvidia.com/gpu": 1}), now=NOW)[1].startswith("not marked")
    assert pending.classify(mig_pod("run-x", phase="Running"), now=NOW) == (False, "phase Running")
    assert pending.classify(mig_pod("young", since=NOW - 5), now=NOW, min_pending_s=30)[1] == \
        "pending only 5 s (min_pending_s 30)"


def test_new_items_sized_so_the_planner_picks_the_requested_profile():
    pods = [mig_pod("llm-7d9f8-abcd%d" % i, owner=("ReplicaSet", "llm-7d9f8")) for i in range(2)]
    pods.append(pod("train-0", ns="team-b", resources={"nvidia.com/gpu": "2"}, owner=("StatefulSet", "train"),
                    message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", priority=1000))
    out = pending.pending_demand(pods, nodes=[knode("n1", {"nvidia.com/mig-1g.10gb": "14"}),
                                              knode("n2", {"nvidia.com/gpu": "8"})], now=NOW)
    new = dict(((d["tenant"], d["name"]), d) for d in out["demand"])
    assert new[("team-a", "llm")] == {"tenant": "team-a", "name": "llm", "replicas": 2, "memory_gb": 40.0,
                                      "compute": 0.4285, "isolation": "strict", "kind": "inference",
                                      "resource": "nvidia.com/mig-3g.40gb"}
    assert new[("team-b", "train")]["gpus_per_replica"] == 2 and new[("team-b", "train")]["priority"] == 1000
    assert out["resources"]["nvidia.com/mig-3g.40gb"] == {
        "pending_pods": 2, "requested": 2, "offered": 0, "why": "no schedulable node offers nvidia.com/mig-3g.40gb"}
    assert out["resources"]["nvidia.com/gpu"]["why"] == "the 8 nvidia.com/gpu the schedulable nodes offer are taken"
    assert out["changed"] and [c["field"] for c in out["changes"]] == ["item", "item"]
    assert all(p["item"]["name"] in ("llm", "train") for p in out["pending"])
    # the planner serves the new item with the profile the pods ask for, on A100 and H100 alike
    for model in (A100, "NVIDIA H100 80GB HBM3"):
        plan = plan_of({"nodes": [{"name": "n1", "gpus": [{"model": model, "count": 2}]}],
                        "demand": [new[("team-a", "llm")]], "solver": "heuristic"})
        assert [d["resource"] for d in plan["decisions"]] == ["nvidia.com/mig-3g.40gb"]
    # on a fleet whose cheaper A100 40GB has no 3g.40gb (it would give a whole GPU), the item goes where the profile is
    plan = plan_of({"nodes": [{"name": "small", "gpus": [{"model": "NVIDIA A100-SXM4-40GB", "count": 8}]},
                              {"name": "big", "gpus": [{"model": A100, "count": 1}]}],
                    "demand": [new[("team-a", "llm")]], "solver": "heuristic"})
    assert [(d["resource"], d["model"]) for d in plan["decisions"]] == [("nvidia.com/mig-3g.40gb", "a100_80gb")]
    with pytest.raises(GpuOpsError, match="unknown MIG resource"):
        plan_of({"nodes": [{"name": "big", "gpus": [{"model": A100, "count": 1}]}],
                 "demand": [dict(new[("team-a", "llm")], resource="nvidia.com/mig-3g.41gb")]})


def test_pending_pods_of_a_declared_item_raise_its_replicas_to_running_plus_pending():
    demand = [{"tenant": "team-a", "name": "chat", "replicas": 2, "memory_gb": 9, "kind": "inference",
               "isolation": "strict"}]
    running = [pod("chat-5b-x%d" % i, resources={"nvidia.com/mig-1g.10gb": 1}, phase="Running", node="n1",
                   owner=("ReplicaSet", "chat-5b")) for i in range(2)]
    waiting = [mig_pod("chat-5b-y%d" % i, profile="1g.10gb", owner=("ReplicaSet", "chat-5b")) for i in range(3)]
    out = pending.pending_demand(running + waiting, demand=demand, now=NOW)
    assert out["demand"][0]["replicas"] == 5 and len(out["demand"]) == 1
    assert out["changes"] == [{"tenant": "team-a", "name": "chat", "field": "replicas", "before": 2, "after": 5,
                               "reason": "3 pending pod(s) and 2 running: 5 replicas wanted, 2 declared"}]
    # labelled pods map by label; an item that already declares enough is unchanged, with the reason
    demand[0]["replicas"] = 6
    labelled = [mig_pod("other-%d" % i, profile="1g.10gb", labels={"gpuops.k8s/demand-item": "chat"}) for i in range(2)]
    out = pending.pending_demand(labelled, demand=demand, now=NOW)
    assert not out["changed"] and out["demand"] == demand
    assert out["pending"][0]["reason"].startswith("item team-a/chat declares 6 replicas already")


def test_ignored_pods_and_bad_input():
    out = pending.pending_demand([pod("p", resources={"nvidia.com/gpu": 1})], now=NOW)
    assert out["demand"] == [] and out["ignored"][0]["reason"].startswith("not marked Unschedulable")
    with pytest.raises(GpuOpsError, match="pods must be a list"):
        pending.pending_demand({"items": []})
    with pytest.raises(GpuOpsError, match="not a whole number"):
        pending.pending_demand([pod("p", resources={"nvidia.com/gpu": "half"})])
    with pytest.raises(GpuOpsError, match="min_pending_s"):
        pending.pending_demand([], min_pending_s=-1)
    with pytest.raises(GpuOpsError, match="replicas"):
        pending.pending_demand([], demand=[{"tenant": "a", "name": "b", "memory_gb": 1, "kind": "inference",
                                            "isolation": "strict"}])


def _plan(changes):
    return {"plan": {"node_configs": [{"node": n, "mig_config": c, "mig_config_changed": ch} for n, c, ch in changes]}}


def pdb(name, ns, labels, allowed):
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed}}


def test_guard_defers_nodes_whose_drain_would_break_a_budget_or_delete_a_bare_pod():
    plan = _plan([("n1", "plan-a", True), ("n2", "plan-b", True), ("n3", "plan-c", True), ("n4", "plan-d", False)])
    pods = [pod("model-0", ns="serve", phase="Running", node="n1", labels={"app": "model"},
                owner=("ReplicaSet", "model-7f")),
            pod("bare", ns="serve", phase="Running", node="n2", owner=None),
            pod("ds", ns="kube-system", phase="Running", node="n3", owner=("DaemonSet", "plugin")),
            pod("web-0", ns="serve", phase="Running", node="n3", labels={"app": "web"}, owner=("ReplicaSet", "web-1")),
            pod("done", ns="serve", phase="Succeeded", node="n1", owner=None),
            pod("model-1", ns="serve", phase="Running", node="n4", labels={"app": "model"}, owner=("ReplicaSet", "m"))]
    pdbs = [pdb("model", "serve", {"app": "model"}, 0), pdb("web", "serve", {"app": "web"}, 1),
            pdb("elsewhere", "other", {"app": "model"}, 0)]
    out = replan.rollout_guard(plan, pods, pdbs)
    assert out["roll"] == ["n3"] and out["changed"] == {"n1": "plan-a", "n2": "plan-b", "n3": "plan-c"}
    assert out["deferred"] == [
        {"node": "n1", "mig_config": "plan-a", "reason": "left for the next round: PodDisruptionBudget serve/model "
         "allows 0 disruption(s); the drain would evict 1 of its pods (serve/model-0)"},
        {"node": "n2", "mig_config": "plan-b", "reason": "left for the next round: pod serve/bare has no controller: "
         "the drain would delete it, not evict it"}]


def test_guard_counts_a_budgets_pods_per_node_and_skips_daemonset_pods():
    # PDB serve/model allows 2 disruptions; its pods spread over the changed nodes. Each node's drain evicts that
    # node's pods of the budget: n1 2 (<= 2, rolls), n2 3 (> 2, deferred), n3 2 plus a DaemonSet pod with the same
    # labels (the drain skips DaemonSet pods: 2, rolls), n4 only a DaemonSet pod of PDB serve/agent, which allows 0
    # (skipped: rolls). Over all nodes the budget has 7 pods: a count across nodes would defer every node.
    plan = _plan([("n1", "c1", True), ("n2", "c2", True), ("n3", "c3", True), ("n4", "c4", True)])
    spread = {"n1": "ab", "n2": "cde", "n3": "fg"}
    pods = [pod("model-" + x, ns="serve", phase="Running", node=n, labels={"app": "model"},
                owner=("ReplicaSet", "model-7f")) for n, xs in sorted(spread.items()) for x in xs]
    pods += [pod("agent-n3", ns="serve", phase="Running", node="n3", labels={"app": "model"},
                 owner=("DaemonSet", "agent")),
             pod("agent-n4", ns="serve", phase="Running", node="n4", labels={"app": "agent"},
                 owner=("DaemonSet", "agent"))]
    pdbs = [pdb("model", "serve", {"app": "model"}, 2), pdb("agent", "serve", {"app": "agent"}, 0)]
    out = replan.rollout_guard(plan, pods, pdbs)
    assert out["roll"] == ["n1", "n3", "n4"]
    assert out["deferred"] == [{"node": "n2", "mig_config": "c2", "reason": (
        "left for the next round: PodDisruptionBudget serve/model allows 2 disruption(s); the drain would evict 3 of "
        "its pods (serve/model-c, serve/model-d, serve/model-e)")}]
    # one more pod of the budget on n1 defers it too; with 3 allowed both n1 and n2 roll
    out = replan.rollout_guard(plan, pods + [pod("model-h", ns="serve", phase="Running", node="n1",
                                                 labels={"app": "model"}, owner=("ReplicaSet", "model-7f"))], pdbs)
    assert out["roll"] == ["n3", "n4"] and [d["node"] for d in out["deferred"]] == ["n1", "n2"]
    pdbs[0]["status"]["disruptionsAllowed"] = 3
    assert replan.rollout_guard(plan, pods, pdbs)["roll"] == ["n1", "n2", "n3", "n4"]


def test_guard_selector_expressions_and_bad_input():
    sel = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]},
                                {"key": "canary", "operator": "DoesNotExist"}]}
    assert replan._selector_matches(sel, {"tier": "gpu"})
    assert not replan._selector_matches(sel, {"tier": "gpu", "canary": "1"})
    assert not replan._selector_matches(sel, {"tier": "cpu"})
    assert replan._selector_matches({}, {"x": "1"}) and not replan._selector_matches(None, {"x": "1"})
    with pytest.raises(GpuOpsError, match="node_configs"):
        replan.rollout_guard({"decisions": []}, [])
    with pytest.raises(GpuOpsError, match="pods must be a list"):
        replan.rollout_guard(_plan([]), None)


def test_loop_on_a_small_fleet_one_node_changes_within_the_budget():
    """Two A100 nodes at all-1g.10gb; a model server fills node 1's seven 1g slices (declared 7 replicas); two pods
    pend for 3g.40gb: the re-plan changes node 2 only (budget 1 GPU) and keeps node 1."""
    nodes = [{"name": "n%d" % i, "gpus": [{"model": A100, "count": 1}], "current": "all-1g.10gb"} for i in (1, 2)]
    demand = [{"tenant": "serve", "name": "model", "replicas": 7, "memory_gb": 9, "kind": "inference",
               "isolation": "strict"}]
    pods = [mig_pod("llm-6c-%d" % i, ns="team-a", owner=("ReplicaSet", "llm-6c")) for i in range(2)]
    out = pending.pending_demand(pods, demand=demand, now=NOW)
    for solver_name in ("heuristic", "exact"):
        plan = plan_of({"nodes": nodes, "demand": out["demand"], "disruption_budget": 1, "solver": solver_name})
        assert plan["summary"]["reconfigured_gpus"] <= 1
        assert not plan["unplaced"], plan["unplaced"]
        changed = replan.changed_nodes(plan)
        assert list(changed) == ["n2"], (solver_name, plan["node_configs"])


def test_running_gpu_pods_of_no_item_are_demand_too_and_their_nodes_are_busy():
    running = [pod("embed-5b-x%d" % i, ns="team-c", resources={"nvidia.com/mig-2g.20gb": 1}, phase="Running",
                   node="n1", owner=("ReplicaSet", "embed-5b")) for i in range(2)]
    waiting = [mig_pod("embed-5b-y0", ns="team-c", profile="2g.20gb", owner=("ReplicaSet", "embed-5b"))]
    out = pending.pending_demand(running + waiting, now=NOW)
    assert out["demand"] == [{"tenant": "team-c", "name": "embed", "replicas": 3, "memory_gb": 20.0, "compute": 0.2857,
                              "isolation": "strict", "kind": "inference", "resource": "nvidia.com/mig-2g.20gb"}]
    assert out["changes"][0]["reason"] == ("2 running and 1 pending pod(s) of team-c/embed (no demand item) ask for "
                                           "nvidia.com/mig-2g.20gb x1: new item team-c/embed")
    assert out["busy_nodes"] == {"n1": 2}
    assert [p["name"] for p in out["pending"]] == ["embed-5b-y0"]


@pytest.mark.parametrize("solver_name", ["heuristic", "exact"])
@pytest.mark.parametrize("order", [(1, 2), (2, 1)])
def test_busy_nodes_keep_their_layout_whatever_the_node_order(solver_name, order):
    """The same fleet as above, the busy node listed first or last: the plan always changes the idle one."""
    nodes = [{"name": "n%d" % i, "gpus": [{"model": A100, "count": 1}], "current": "all-1g.10gb",
              "busy": 1 if i == 1 else 0} for i in order]
    demand = [{"tenant": "serve", "name": "model", "replicas": 7, "memory_gb": 9, "kind": "inference",
               "isolation": "strict"},
              {"tenant": "team-a", "name": "llm", "replicas": 2, "memory_gb": 40, "compute": 0.4285,
               "kind": "inference", "isolation": "strict"}]
    plan = plan_of({"nodes": nodes, "demand": demand, "disruption_budget": 1, "solver": solver_name})
    assert not plan["unplaced"] and list(replan.changed_nodes(plan)) == ["n2"], plan["node_configs"]
    with pytest.raises(GpuOpsError, match="busy"):
        plan_of({"nodes": [dict(nodes[0], busy=-1)], "demand": demand})


def test_planner_nodes_take_the_live_label_and_the_busy_count():
    nodes = [{"name": "a", "gpus": [{"model": A100, "count": 1}], "current": "all-1g.10gb"},
             {"name": "b", "gpus": [{"model": A100, "count": 1}]}]
    live = [{"metadata": {"name": "a", "labels": {"nvidia.com/mig.config": "plan-x"}}}, {"metadata": {"name": "b"}}]
    out = replan.planner_nodes(nodes, live, {"a": 3})
    assert [(n["name"], n.get("current"), n.get("busy")) for n in out] == [("a", "plan-x", 3), ("b", "all-disabled", 0)]
    with pytest.raises(GpuOpsError, match="node list"):
        replan.planner_nodes({"a": 1})


def test_a_node_no_plan_has_labelled_counts_against_the_budget():
    """Unlabelled, without ``current``: its GPUs are whole, so splitting one is a reconfiguration (budget 0: none)."""
    nodes = replan.planner_nodes([{"name": "b", "gpus": [{"model": A100, "count": 1}]}],
                                 [{"metadata": {"name": "b"}}])
    demand = [{"tenant": "team-a", "name": "llm", "replicas": 2, "memory_gb": 40, "compute": 0.4285,
               "kind": "inference", "isolation": "strict", "resource": "nvidia.com/mig-3g.40gb"}]
    held = plan_of({"nodes": nodes, "demand": demand, "disruption_budget": 0, "solver": "heuristic"})
    assert held["summary"]["reconfigured_gpus"] == 0 and held["unplaced"][0]["replicas"] == 2, held["unplaced"]
    assert "disruption_budget" in held["unplaced"][0]["reason"]
    moved = plan_of({"nodes": nodes, "demand": demand, "disruption_budget": 1, "solver": "heuristic"})
    assert moved["summary"]["reconfigured_gpus"] == 1 and not moved["unplaced"], moved["summary"]
