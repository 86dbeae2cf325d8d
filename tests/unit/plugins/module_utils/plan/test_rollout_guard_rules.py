# -*- coding: utf-8 -*-
"""plan/replan.py through its public functions, rule by rule (make mutate's survivors, docs/testing.md): the
Kubernetes label-selector semantics of a PodDisruptionBudget (policy/v1: matchLabels AND every matchExpression; In,
NotIn, Exists, DoesNotExist), which pods a drain counts (not DaemonSet pods, finished pods or pods being deleted),
the per-node count against ``disruptionsAllowed``, the reasons' text, and planner_nodes' defaults. Every expected
value is worked out from those rules by hand."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import replan

NODE = "n1"


def _plan(*nodes):
    return {"plan": {"node_configs": [{"node": n, "mig_config": "cfg-" + n, "mig_config_changed": True}
                                      for n in nodes]}}


def _pod(name, ns="serve", labels=None, owner="ReplicaSet", node=NODE, phase="Running", deleting=False):
    meta = {"name": name, "namespace": ns, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "owner-of-" + name}]
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def _pdb(name, selector, allowed, ns="serve"):
    out = {"metadata": {"name": name, "namespace": ns}, "spec": {"selector": selector}}
    if allowed is not None:
        out["status"] = {"disruptionsAllowed": allowed}
    return out


def _rolls(pods, pdbs, nodes=(NODE,)):
    """True when the guard lets NODE roll now (the PDB allows 0 disruptions in the selector cases below, so the
    node is held exactly when the PDB selects the pod)."""
    out = replan.rollout_guard(_plan(*nodes), pods, pdbs)
    return NODE in out["roll"]


def _selects(selector, labels):
    """Whether a PDB with ``selector`` (0 disruptions allowed) selects a pod with ``labels``: it holds the node."""
    return not _rolls([_pod("p", labels=labels)], [_pdb("b", selector, 0)])


@pytest.mark.parametrize("selector, labels, selected", [
    # matchLabels: every pair must be there with the same value.
    ({"matchLabels": {"app": "m"}}, {"app": "m", "x": "1"}, True),
    ({"matchLabels": {"app": "m"}}, {"app": "n"}, False),
    ({"matchLabels": {"app": "m", "tier": "gpu"}}, {"app": "m"}, False),
    ({"matchLabels": {"app": "m"}}, None, False),
    # In: the key there with one of the values.
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["m", "n"]}]}, {"app": "n"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["m"]}]}, {"app": "z"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["m"]}]}, {}, False),
    # NotIn: the key absent, or there with none of the values.
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["m"]}]}, {}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["m"]}]}, {"app": "z"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["m"]}]}, {"app": "m"}, False),
    # Exists / DoesNotExist: only the key matters (no values).
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"app": "z"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, {"tier": "z"}, False),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"tier": "z"}, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, {"app": "z"}, False),
    # Both parts ANDed; an empty selector selects every pod of the namespace.
    ({"matchLabels": {"app": "m"}, "matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]},
     {"app": "m"}, True),
    ({"matchLabels": {"app": "m"}, "matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}]},
     {"app": "m", "canary": "1"}, False),
    ({}, {"anything": "1"}, True),
])
def test_a_budget_selects_pods_by_kubernetes_label_selector_rules(selector, labels, selected):
    assert _selects(selector, labels) is selected


def test_a_budget_without_selector_selects_nothing():
    pdb = {"metadata": {"name": "b", "namespace": "serve"}, "spec": {}, "status": {"disruptionsAllowed": 0}}
    assert replan.rollout_guard(_plan(NODE), [_pod("p", labels={"app": "m"})], [pdb])["roll"] == [NODE]


def test_pods_the_drain_skips_do_not_count():
    """A bare pod would hold the node, unless it is being deleted or has finished (the drain skips those); a
    DaemonSet pod under a budget that allows nothing does not hold it either (the drain leaves DaemonSet pods)."""
    zero = [_pdb("all", {}, 0)]
    assert _rolls([_pod("gone", owner=None, deleting=True)], [])
    assert _rolls([_pod("done", owner=None, phase="Succeeded")], [])
    assert _rolls([_pod("failed", owner=None, phase="Failed")], [])
    assert _rolls([_pod("ds", owner="DaemonSet")], zero)
    # ...and the same pods alive, unfinished or owned by a ReplicaSet / StatefulSet / Job do hold it.
    assert not _rolls([_pod("bare", owner=None)], [])
    assert not _rolls([_pod("pending-bare", owner=None, phase="Pending")], [])
    # (CloneSet: OpenKruise's workload, a kind that sorts before DaemonSet)
    for kind in ("ReplicaSet", "StatefulSet", "Job", "CloneSet"):
        assert not _rolls([_pod("p", owner=kind)], zero), kind


def test_pods_on_other_nodes_do_not_count():
    pods = [_pod("bare", owner=None, node="n2"), _pod("elsewhere", owner=None, node="n9"),
            {"metadata": {"name": "unscheduled", "namespace": "serve"}}]
    out = replan.rollout_guard(_plan("n1", "n2"), pods, [])
    assert out["roll"] == ["n1"] and [d["node"] for d in out["deferred"]] == ["n2"]


@pytest.mark.parametrize("allowed, pods_on_node, rolls", [
    (0, 1, False), (1, 1, True), (1, 2, False), (2, 2, True), (3, 2, True), (2, 3, False), (None, 1, False)])
def test_a_budget_holds_the_node_when_it_allows_fewer_disruptions_than_its_pods_there(allowed, pods_on_node, rolls):
    """The drain evicts every pod of the node at once: it needs disruptionsAllowed >= that budget's pods on the
    node (a budget without status allows 0)."""
    pods = [_pod("m-%d" % i, labels={"app": "m"}) for i in range(pods_on_node)]
    pods.append(_pod("m-other-node", labels={"app": "m"}, node="n2"))  # counted on n2, not on n1
    out = replan.rollout_guard(_plan("n1", "n2"), pods, [_pdb("b", {"matchLabels": {"app": "m"}}, allowed)])
    assert (NODE in out["roll"]) is rolls


def test_budgets_count_per_budget_and_only_in_their_namespace():
    """Two budgets, each allowing 1, each with one pod on the node: the node rolls. A budget of another namespace
    with the same selector listed first (or last) changes nothing."""
    pods = [_pod("a-0", labels={"app": "a"}), _pod("b-0", labels={"app": "b"})]
    pdbs = [_pdb("x", {"matchLabels": {"app": "a"}}, 0, ns="aaa"), _pdb("a", {"matchLabels": {"app": "a"}}, 1),
            _pdb("b", {"matchLabels": {"app": "b"}}, 1), _pdb("z", {"matchLabels": {"app": "b"}}, 0, ns="zzz")]
    assert _rolls(pods, pdbs)
    # Same, budget "a" now allowing 0 after a budget of another namespace: held by "a" alone.
    pdbs[1] = _pdb("a", {"matchLabels": {"app": "a"}}, 0)
    out = replan.rollout_guard(_plan(NODE), pods, pdbs)
    assert out["deferred"] == [{"node": NODE, "mig_config": "cfg-n1", "reason": (
        "left for the next round: PodDisruptionBudget serve/a allows 0 disruption(s); the drain would evict 1 of "
        "its pods (serve/a-0)")}]


def test_every_reason_of_a_held_node_is_given_in_order():
    """A bare pod listed first, then two pods of a budget allowing 1: both reasons, the bare pod first, the budget's
    pods sorted by name."""
    pods = [_pod("lonely", owner=None), _pod("m-b", labels={"app": "m"}), _pod("m-a", labels={"app": "m"})]
    out = replan.rollout_guard(_plan(NODE), pods, [_pdb("model", {"matchLabels": {"app": "m"}}, 1)])
    assert out == {"roll": [], "changed": {NODE: "cfg-n1"}, "deferred": [{"node": NODE, "mig_config": "cfg-n1", "reason": (
        "left for the next round: pod serve/lonely has no controller: the drain would delete it, not evict it; "
        "PodDisruptionBudget serve/model allows 1 disruption(s); the drain would evict 2 of its pods "
        "(serve/m-a, serve/m-b)")}]}


def test_changed_nodes_takes_the_plan_or_its_result_and_only_changed_layouts():
    inner = {"node_configs": [{"node": "a", "mig_config": "x", "mig_config_changed": True},
                              {"node": "b", "mig_config": "y", "mig_config_changed": False},
                              {"node": "c", "mig_config": None, "mig_config_changed": True}]}
    assert replan.changed_nodes(inner) == {"a": "x"}
    assert replan.changed_nodes({"plan": inner}) == {"a": "x"}
    for bad in ([], "plan", {"plan": {}}, {"node_configs": {}}):
        with pytest.raises(GpuOpsError, match="node_configs"):
            replan.changed_nodes(bad)


def test_bad_pods_and_nodes_name_the_type_given():
    with pytest.raises(GpuOpsError, match=r"got dict$"):
        replan.rollout_guard(_plan(NODE), {})
    with pytest.raises(GpuOpsError, match=r"got str$"):
        replan.planner_nodes("a")


def test_planner_nodes_defaults():
    """No live nodes and no busy map: each node keeps its own ``current`` (or all-disabled without one) and is
    idle; a live node with an empty label changes nothing; the input list is not modified."""
    nodes = [{"name": "a", "current": "all-1g.10gb"}, {"name": "b"}]
    assert replan.planner_nodes(nodes) == [{"name": "a", "current": "all-1g.10gb", "busy": 0},
                                           {"name": "b", "current": "all-disabled", "busy": 0}]
    live = [{"metadata": {"name": "a", "labels": {"nvidia.com/mig.config": ""}}}, {"metadata": None},
            {"metadata": {"name": "b", "labels": {"nvidia.com/mig.config": "all-3g.40gb"}}}]
    assert replan.planner_nodes(nodes, live, {"b": 2}) == [{"name": "a", "current": "all-1g.10gb", "busy": 0},
                                                           {"name": "b", "current": "all-3g.40gb", "busy": 2}]
    assert nodes == [{"name": "a", "current": "all-1g.10gb"}, {"name": "b"}]
