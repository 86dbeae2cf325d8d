# -*- coding: utf-8 -*-
"""plan/pending.py through its public functions, rule by rule (make mutate's survivors, docs/testing.md): which
pods wait for a GPU and why the others are left out, how requests, offers and timestamps are read, how a resource
is sized for the planner, and how pending_demand names, counts and reports the new items. Expected values worked
out by hand from the module's documented rules (Kubernetes: requests override limits per container and are summed
over containers; allocatable of schedulable nodes only; 1_800_000_000 s is 2027-01-15T08:00:00Z)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import pending

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
MIG3 = "nvidia.com/mig-3g.40gb"


def _pod(name, ns="team-a", limits=None, requests=None, phase="Pending", message=None, since=None, node=None,
         owner=("ReplicaSet", None), labels=None, priority=None, created=None, cond=None, deleting=False):
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1] or name.rsplit("-", 1)[0]}]
    if created is not None:
        meta["creationTimestamp"] = created
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T07:59:00Z"
    status = {"phase": phase}
    if cond is not None:
        status["conditions"] = cond
    elif message is not None:
        c = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        if since is not None:
            c["lastTransitionTime"] = since
        status["conditions"] = [c]
    res = {}
    if limits is not None:
        res["limits"] = limits
    if requests is not None:
        res["requests"] = requests
    spec = {"containers": [{"name": "main", "resources": res}]}
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": meta, "spec": spec, "status": status}


def _waiting(name, res=MIG3, count=1, **kw):
    kw.setdefault("message", "0/4 nodes are available: 4 Insufficient %s." % res)
    return _pod(name, limits={res: str(count)}, **kw)


def test_requests_override_limits_per_container_and_add_up_over_containers():
    pod = {"metadata": {"name": "p", "namespace": "a"}, "spec": {"containers": [
        {"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}, "requests": {"nvidia.com/gpu": "1"}}},
        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 3, "nvidia.com/mig-1g.10gb": "0"}}},
        {"name": "c"}]}}
    assert pending.gpu_requests(pod) == {"nvidia.com/gpu": 4}
    assert pending.gpu_requests({"metadata": {}}) == {}
    with pytest.raises(GpuOpsError, match=r"pod a/p container b resource nvidia.com/gpu: '1.5'"):
        pending.gpu_requests({"metadata": {"name": "p", "namespace": "a"}, "spec": {"containers": [
            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]}})


def test_only_a_false_unschedulable_podscheduled_condition_counts():
    ok = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    assert pending.unschedulable_condition({"status": {"conditions": [{"type": "Ready", "status": "False"}, ok]}}) == ok
    assert pending.unschedulable_condition({"status": {"conditions": [dict(ok, status=False)]}}) is not None
    for bad in (dict(ok, type="Ready"), dict(ok, status="True"), dict(ok, reason="SchedulingGated")):
        assert pending.unschedulable_condition({"status": {"conditions": [bad]}}) is None, bad
    assert pending.unschedulable_condition({}) is None


@pytest.mark.parametrize("pod, reason", [
    (_waiting("r", phase="Running"), "phase Running"),
    (_pod("cpu", limits={"cpu": "2"}, message="0/4 nodes are available: 4 Insufficient cpu."),
     "requests no NVIDIA resource"),
    (_waiting("bound", node="n3"), "bound to node n3 (starting)"),
    (_pod("new", limits={MIG3: "1"}), "not marked Unschedulable by the scheduler (yet)"),
    (_waiting("taint", message="0/4 nodes are available: 4 node(s) had untolerated taint."),
     "unschedulable for another reason than its GPU resource: 0/4 nodes are available: 4 node(s) had untolerated "
     "taint."),
    (_waiting("cpu-short", message="0/4 nodes are available: 4 Insufficient cpu."),
     "unschedulable for another reason than its GPU resource: 0/4 nodes are available: 4 Insufficient cpu."),
    (_waiting("quiet", message=""), "unschedulable for another reason than its GPU resource: no message"),
])
def test_pods_left_out_with_the_reason(pod, reason):
    assert pending.classify(pod, now=NOW) == (False, reason)


def test_min_pending_reads_the_condition_time_then_the_creation_time():
    two_min = "2027-01-15T07:58:00Z"  # 120 s before NOW
    assert pending.classify(_waiting("a", since=two_min), now=NOW, min_pending_s=300) == (
        False, "pending only 120 s (min_pending_s 300)")
    assert pending.classify(_waiting("a", since=two_min), now=NOW, min_pending_s=120)[0] is True
    assert pending.classify(_waiting("b", since=NOW - 30), now=NOW, min_pending_s=60) == (
        False, "pending only 30 s (min_pending_s 60)")
    # no condition time: the pod's creation; neither (or unreadable): no minimum applies
    assert pending.classify(_waiting("c", created="2027-01-15T07:59:00Z"), now=NOW, min_pending_s=90) == (
        False, "pending only 60 s (min_pending_s 90)")
    assert pending.classify(_waiting("d", since="yesterday"), now=NOW, min_pending_s=10 ** 6)[0] is True
    # a condition time ahead of this clock (skew): not pending long, whatever the minimum
    assert pending.classify(_waiting("f", since=NOW + 30), now=NOW, min_pending_s=10) == (
        False, "pending only -30 s (min_pending_s 10)")
    assert pending.classify(_waiting("e"), now=NOW, min_pending_s=10 ** 6)[0] is True


def test_the_facts_of_a_waiting_pod():
    pod = _pod("llm-6c-x1", ns="team-b", limits={MIG3: "1", "nvidia.com/mig-1g.10gb": "2"},
               message="0/4 nodes are available: 2 Insufficient nvidia.com/mig-1g.10gb, 4 Insufficient %s." % MIG3,
               since=NOW - 10, labels={"app": "llm"}, priority=7)
    pod["metadata"]["ownerReferences"].append({"kind": "Other", "name": "second"})
    ok, facts = pending.classify(pod, now=NOW)
    assert ok is True
    assert facts == {"namespace": "team-b", "name": "llm-6c-x1", "labels": {"app": "llm"},
                     "owner": {"kind": "ReplicaSet", "name": "llm-6c"},
                     "resources": {MIG3: 1, "nvidia.com/mig-1g.10gb": 2},
                     "short": ["nvidia.com/mig-1g.10gb", MIG3], "message": pod["status"]["conditions"][0]["message"],
                     "since": NOW - 10, "priority": 7}
    assert pending.classify(_waiting("bare", owner=None), now=NOW)[1]["owner"] is None


def test_offered_counts_schedulable_nodes_and_skips_unreadable_values():
    nodes = [{"status": {"allocatable": {MIG3: "2", "cpu": "8"}}},
             {"spec": {"unschedulable": True}, "status": {"allocatable": {MIG3: "5"}}},
             {"spec": {"unschedulable": False}, "status": {"allocatable": {"nvidia.com/gpu": "bad", MIG3: "1"}}},
             {"metadata": {"name": "no-status"}}]
    assert pending.offered(nodes) == {MIG3: 3}
    assert pending.offered(None) == {}


@pytest.mark.parametrize("resource, count, expected", [
    ("nvidia.com/gpu", 2, {"memory_gb": 1.0, "compute": 1.0, "isolation": "strict", "kind": "inference",
                           "gpus_per_replica": 2}),
    ("nvidia.com/gpu.shared", 1, {"memory_gb": 12.0, "isolation": "shared", "kind": "inference"}),
    # A100/H100 profiles: 7 compute slices; 3/7 = 0.428571... floored to 4 digits
    (MIG3, 1, {"memory_gb": 40.0, "compute": 0.4285, "isolation": "strict", "kind": "inference"}),
    ("nvidia.com/mig-1g.10gb.shared", 1, {"memory_gb": 10.0, "compute": 0.1428, "isolation": "shared",
                                          "kind": "inference"}),
    # A30 profiles: 4 compute slices
    ("nvidia.com/mig-2g.12gb", 1, {"memory_gb": 12.0, "compute": 0.5, "isolation": "strict", "kind": "inference"}),
    ("nvidia.com/mig-1g.6gb", 1, {"memory_gb": 6.0, "compute": 0.25, "isolation": "strict", "kind": "inference"}),
    # a profile of no catalogued GPU: 7 slices assumed; 5/7 = 0.714285... floored (rounding would give 0.7143)
    ("nvidia.com/mig-5g.99gb", 1, {"memory_gb": 99.0, "compute": 0.7142, "isolation": "strict", "kind": "inference"}),
])
def test_size_for_makes_the_planner_pick_the_resource(resource, count, expected):
    assert pending.size_for(resource, count, 12) == expected


def test_size_for_refuses_what_it_cannot_size():
    with pytest.raises(GpuOpsError, match="cannot size nvidia.com/mig-big: the planner hands out MIG profiles"):
        pending.size_for("nvidia.com/mig-big", 1, 10)


def test_running_gpu_pods():
    pods = [_pod("a-0", limits={MIG3: "1"}, phase="Running", node="n1", owner=("StatefulSet", "a")),
            _pod("gone", limits={MIG3: "1"}, phase="Running", node="n1", deleting=True),
            _pod("wait", limits={MIG3: "1"}),
            _pod("cpu", limits={"cpu": "1"}, phase="Running", node="n1")]
    assert pending.running_gpu_pods(pods) == [{"namespace": "team-a", "name": "a-0", "labels": {},
                                               "owner": {"kind": "StatefulSet", "name": "a"},
                                               "resources": {MIG3: 1}, "node": "n1"}]
    assert pending.running_gpu_pods(None) == []


def test_pending_demand_lists_the_gpu_pods_it_leaves_out_and_checks_its_input():
    pods = [_waiting("llm-6c-a"), _waiting("llm-6c-b", node="n2"),
            _pod("cpu-only", limits={"cpu": "1"}, message="0/4 nodes are available: 4 Insufficient cpu."),
            _pod("run", limits={MIG3: "1"}, phase="Running", node="n1", owner=("StatefulSet", "run"))]
    out = pending.pending_demand(pods, now=NOW)
    assert out["ignored"] == [{"namespace": "team-a", "name": "llm-6c-b", "reason": "bound to node n2 (starting)"}]
    assert [p["name"] for p in out["pending"]] == ["llm-6c-a"]
    assert out["busy_nodes"] == {"n1": 1} and out["changed"] is True
    with pytest.raises(GpuOpsError, match=r"pods must be a list .*got dict$"):
        pending.pending_demand({})
    with pytest.raises(GpuOpsError, match=r"each entry must be a Pod resource \(a mapping\), got str$"):
        pending.pending_demand(["pod"])
    with pytest.raises(GpuOpsError, match="shared_memory_gb"):
        pending.pending_demand([], shared_memory_gb=0)


def test_declared_items_grow_to_running_plus_pending_only_when_that_is_more():
    demand = [{"tenant": "team-a", "name": "llm", "replicas": 2, "memory_gb": 40, "kind": "inference",
               "isolation": "strict"},
              {"tenant": "team-a", "name": "big", "replicas": 5, "memory_gb": 40, "kind": "inference",
               "isolation": "strict"}]
    pods = ([_pod("llm-6c-r%d" % i, limits={MIG3: "1"}, phase="Running", node="n1") for i in range(2)]
            + [_waiting("llm-6c-p%d" % i) for i in range(3)]
            + [_pod("big-7d-r0", limits={MIG3: "1"}, phase="Running", node="n2"), _waiting("big-7d-p0")])
    out = pending.pending_demand(pods, demand=demand, now=NOW)
    # llm: 2 running + 3 pending = 5 > 2 declared; big: 1 + 1 = 2 <= 5 declared
    assert [d["replicas"] for d in out["demand"]] == [5, 5] and demand[0]["replicas"] == 2
    assert out["changes"] == [{"tenant": "team-a", "name": "llm", "field": "replicas", "before": 2, "after": 5,
                               "reason": "3 pending pod(s) and 2 running: 5 replicas wanted, 2 declared"}]
    reasons = dict((p["name"], p["reason"]) for p in out["pending"])
    assert reasons["llm-6c-p0"] == "3 pending pod(s) and 2 running: 5 replicas wanted, 2 declared"
    assert reasons["big-7d-p0"] == ("item team-a/big declares 5 replicas already: 1 pending pod(s) and 1 running: "
                                    "2 replicas wanted, 5 declared")
    assert out["busy_nodes"] == {"n1": 2, "n2": 1}
    # exactly as many as declared: no change either
    out = pending.pending_demand(pods[:1] + [_waiting("llm-6c-p0")], demand=demand[:1], now=NOW)  # 1 + 1 = 2
    assert out["changes"] == [] and out["changed"] is False and out["demand"][0]["replicas"] == 2


def test_new_items_are_named_per_namespace_workload_and_resource():
    """Two resources of one workload get the resource in their names; a name a declared item already has gets
    '-x'; whole GPUs x2 keep gpus_per_replica; the highest non-zero pod priority is the item's."""
    demand = [{"tenant": "team-a", "name": "solo", "replicas": 1, "memory_gb": 10, "kind": "inference",
               "isolation": "strict", "resource": "nvidia.com/mig-1g.10gb"}]
    pods = [_waiting("mix-6c-a", priority=3), _waiting("mix-6c-b", res="nvidia.com/mig-1g.10gb", priority=0),
            _waiting("mix-6c-c", priority=5),
            _waiting("train-0", res="nvidia.com/gpu", count=2, owner=("StatefulSet", "train")),
            _waiting("solo", res="nvidia.com/gpu", count=1, owner=None, labels={"x": "y"}, ns="team-b"),
            _waiting("other-6c-a", res="nvidia.com/gpu", owner=("Job", "Solo"), ns="team-a")]
    out = pending.pending_demand(pods, demand=demand, now=NOW)
    new = dict(((d["tenant"], d["name"]), d) for d in out["demand"][1:])
    assert sorted(new) == [("team-a", "mix-mig-1g-10gb"), ("team-a", "mix-mig-3g-40gb"), ("team-a", "solo-x"),
                           ("team-a", "train"), ("team-b", "solo")]
    assert new[("team-a", "mix-mig-3g-40gb")] == {"tenant": "team-a", "name": "mix-mig-3g-40gb", "replicas": 2,
                                                  "memory_gb": 40.0, "compute": 0.4285, "isolation": "strict",
                                                  "kind": "inference", "resource": MIG3, "priority": 5}
    assert "priority" not in new[("team-a", "mix-mig-1g-10gb")]
    assert new[("team-a", "train")]["gpus_per_replica"] == 2 and "gpus_per_replica" not in new[("team-b", "solo")]
    assert new[("team-a", "solo-x")]["resource"] == "nvidia.com/gpu"
    change = [c for c in out["changes"] if c["name"] == "train"][0]
    assert change["reason"] == ("0 running and 1 pending pod(s) of team-a/train (no demand item) ask for "
                                "nvidia.com/gpu x2: new item team-a/train")
    assert change["field"] == "item" and change["before"] is None and change["after"] == new[("team-a", "train")]
    items = dict((p["name"], p["item"]) for p in out["pending"])
    assert items["mix-6c-b"] == {"tenant": "team-a", "name": "mix-mig-1g-10gb"}
    assert items["other-6c-a"] == {"tenant": "team-a", "name": "solo-x"}


def test_item_names_are_dns_labels():
    out = pending.pending_demand([_waiting("x", owner=("Job", "Train_Run.v2--")),
                                  _waiting("y", owner=("Job", "-" * 3))], now=NOW)
    assert [d["name"] for d in out["demand"]] == ["pending", "train-run-v2"]
    # at most 63 characters (a DNS label), no dash left at either end after the cut
    out = pending.pending_demand([_waiting("z", owner=("Job", "a" * 70))], now=NOW)
    assert out["demand"][0]["name"] == "a" * 63
    out = pending.pending_demand([_waiting("z", owner=("Job", "a" * 62 + "-b"))], now=NOW)
    assert out["demand"][0]["name"] == "a" * 62


def test_resources_say_why_the_pods_wait():
    nodes = [{"status": {"allocatable": {MIG3: "2"}}}]
    pods = [_waiting("a-6c-%s" % s, owner=("ReplicaSet", "a-6c")) for s in "xy"] + [
        _waiting("g-0", res="nvidia.com/gpu", count=2, owner=("StatefulSet", "g"))]
    out = pending.pending_demand(pods, nodes=nodes, now=NOW)
    assert out["resources"] == {
        MIG3: {"pending_pods": 2, "requested": 2, "offered": 2,
               "why": "the 2 nvidia.com/mig-3g.40gb the schedulable nodes offer are taken"},
        "nvidia.com/gpu": {"pending_pods": 1, "requested": 2, "offered": 0,
                           "why": "no schedulable node offers nvidia.com/gpu"}}
    assert out["pending"][0] == {"namespace": "team-a", "name": "a-6c-x", "resources": {MIG3: 1},
                                 "item": {"tenant": "team-a", "name": "a"},
                                 "reason": "0 running and 2 pending pod(s) of team-a/a (no demand item) ask for "
                                           "nvidia.com/mig-3g.40gb x1: new item team-a/a",
                                 "message": "0/4 nodes are available: 4 Insufficient nvidia.com/mig-3g.40gb.",
                                 "since": None}


def test_an_item_with_no_running_pod_wants_its_pending_ones_beside_new_items():
    """Item 'fresh' declares 1 replica, none runs, 2 pend: 2 wanted. A pending pod of no item in the same call gets
    the new item's reason (the two kinds of pending pod are handled apart)."""
    demand = [{"tenant": "team-a", "name": "fresh", "replicas": 1, "memory_gb": 40, "kind": "inference",
               "isolation": "strict"}]
    pods = [_waiting("fresh-6c-a"), _waiting("fresh-6c-b"), _waiting("new-0", owner=("StatefulSet", "new"))]
    out = pending.pending_demand(pods, demand=demand, now=NOW)
    assert out["changes"][0] == {"tenant": "team-a", "name": "fresh", "field": "replicas", "before": 1, "after": 2,
                                 "reason": "2 pending pod(s) and 0 running: 2 replicas wanted, 1 declared"}
    reasons = dict((p["name"], p["reason"]) for p in out["pending"])
    assert reasons == {
        "fresh-6c-a": "2 pending pod(s) and 0 running: 2 replicas wanted, 1 declared",
        "fresh-6c-b": "2 pending pod(s) and 0 running: 2 replicas wanted, 1 declared",
        "new-0": "0 running and 1 pending pod(s) of team-a/new (no demand item) ask for nvidia.com/mig-3g.40gb x1: "
                 "new item team-a/new"}


def test_defaults_no_minimum_age_and_10_gb_for_a_shared_gpu():
    """By default a pod marked Unschedulable this very second counts, and a gpu.shared item gets 10 GB."""
    assert pending.classify(_waiting("now", since=NOW), now=NOW)[0] is True
    assert pending.classify(_waiting("skew", since=NOW + 0.5), now=NOW) == (
        False, "pending only -0 s (min_pending_s 0)")
    out = pending.pending_demand([_waiting("s-0", res="nvidia.com/gpu.shared", since=NOW,
                                           owner=("StatefulSet", "s"))], now=NOW)
    assert out["demand"][0]["memory_gb"] == 10.0 and out["demand"][0]["isolation"] == "shared"
    out = pending.pending_demand([_waiting("s-0", res="nvidia.com/gpu.shared", owner=("StatefulSet", "s"))],
                                 now=NOW, shared_memory_gb=0.5)
    assert out["demand"][0]["memory_gb"] == 0.5


def test_finished_pods_are_neither_waiting_running_nor_ignored():
    failed = _waiting("f", phase="Failed")
    assert pending.classify(failed, now=NOW) == (False, "phase Failed")
    done = _pod("d", limits={MIG3: "1"}, phase="Succeeded", node="n1")
    assert pending.running_gpu_pods([failed, done]) == []
    out = pending.pending_demand([failed, done], now=NOW)
    assert out["ignored"] == [] and out["pending"] == [] and out["busy_nodes"] == {}


def test_a_condition_of_another_type_is_not_the_scheduler_s():
    cond = {"type": "ContainersReady", "status": "False", "reason": "Unschedulable", "message": "m"}
    assert pending.unschedulable_condition({"status": {"conditions": [cond]}}) is None


def test_running_pods_keep_their_labels_and_first_owner():
    pod = _pod("r-0", limits={MIG3: "1"}, phase="Running", node="n1", owner=("StatefulSet", "r"),
               labels={"app": "r"})
    pod["metadata"]["ownerReferences"].append({"kind": "Other", "name": "second"})
    assert pending.running_gpu_pods([pod]) == [{"namespace": "team-a", "name": "r-0", "labels": {"app": "r"},
                                                "owner": {"kind": "StatefulSet", "name": "r"},
                                                "resources": {MIG3: 1}, "node": "n1"}]


def test_workloads_of_one_resource_keep_their_names_among_others():
    pods = [_waiting("%s-0" % w, owner=("StatefulSet", w)) for w in ("alpha", "beta", "gamma")]
    out = pending.pending_demand(pods, now=NOW)
    assert [d["name"] for d in out["demand"]] == ["alpha", "beta", "gamma"]


def test_a_pod_of_an_item_that_declares_enough_says_so():
    demand = [{"tenant": "team-a", "name": "llm", "replicas": 2, "memory_gb": 40, "kind": "inference",
               "isolation": "strict"}]
    pods = [_pod("llm-6c-r0", limits={MIG3: "1"}, phase="Running", node="n1"), _waiting("llm-6c-p0")]
    out = pending.pending_demand(pods, demand=demand, now=NOW)
    assert out["pending"][0]["reason"] == ("item team-a/llm declares 2 replicas already: 1 pending pod(s) and 1 "
                                           "running: 2 replicas wanted, 2 declared")
