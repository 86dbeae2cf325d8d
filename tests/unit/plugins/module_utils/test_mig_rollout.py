"""Unit tests for mig_rollout: rollout planning, last good layout, failure budget."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.mig import rollout as mr
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def node(name, config=None, state=None, annotations=None, alloc=None, unschedulable=False):
    labels = {}
    if config:
        labels[mr.LABEL_CONFIG] = config
    if state:
        labels[mr.LABEL_STATE] = state
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"unschedulable": unschedulable}, "status": {"allocatable": alloc or {}}}


HOSTS = ["a", "b", "c", "d", "e"]


def nodes(**kw):
    return {h: kw.get(h, node(h, "all-1g.10gb", "success")) for h in HOSTS}


def test_canary_then_batches():
    plan = mr.plan_rollout(HOSTS, nodes(), "mixed", canary=1, batch_size=2)
    assert plan["batches"] == [["a"], ["b", "c"], ["d", "e"]]
    assert plan["serial"] == [1, 2]
    assert plan["per_node"]["a"]["canary"] is True
    assert plan["per_node"]["b"]["canary"] is False
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"
    assert plan["per_node"]["c"]["steps"][0].startswith("label nvidia.com/mig.config=mixed")


def test_no_canary():
    plan = mr.plan_rollout(HOSTS, nodes(), "mixed", canary=0, batch_size=3)
    assert plan["batches"] == [["a", "b", "c"], ["d", "e"]]
    assert plan["serial"] == [3]


def test_skips_nodes_already_done_and_canary_is_first_to_change():
    plan = mr.plan_rollout(HOSTS, nodes(a=node("a", "mixed", "success")), "mixed")
    assert plan["skipped"] == [{"node": "a", "reason": "already at mixed (state success)"}]
    assert plan["batches"][0] == ["b"]
    forced = mr.plan_rollout(HOSTS, nodes(a=node("a", "mixed", "success")), "mixed", force=True)
    assert forced["batches"][0] == ["a"]


def test_failed_node_is_retried_with_recorded_last_good():
    failed = node("c", "mixed", "failed", annotations={mr.ANN_LAST_GOOD: "all-1g.10gb"})
    plan = mr.plan_rollout(HOSTS, nodes(c=failed), "mixed")
    assert "c" in plan["nodes"]
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"


def test_unlabelled_node_rolls_back_to_its_inventory_config():
    """A node set up by gpu_nodes.yml carries no mig.config label: its rollback target is the inventory's."""
    bare = {"a": node("a"), "b": node("b"), "c": node("c", "all-1g.10gb", "success")}
    plan = mr.plan_rollout(["a", "b", "c"], bare, "all-disabled",
                           inventory_configs={"a": "h100-mixed", "c": "ignored-label-wins"})
    assert plan["per_node"]["a"]["last_good"] == "h100-mixed"
    assert plan["per_node"]["b"]["last_good"] == "all-disabled"
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"


def test_pending_without_record_falls_back_to_default():
    plan = mr.plan_rollout(["a"], {"a": node("a", "mixed", "pending")}, "mixed")
    assert plan["per_node"]["a"]["last_good"] == "all-disabled"


def test_unknown_config_and_missing_node():
    with pytest.raises(GpuOpsError, match="unknown MIG config 'nope'; the config file defines: all-1g.10gb, mixed"):
        mr.plan_rollout(HOSTS, nodes(), "nope", known_configs=["mixed", "all-1g.10gb"])
    with pytest.raises(GpuOpsError, match="no Kubernetes node for host"):
        mr.plan_rollout(HOSTS, dict(nodes(), b=None), "mixed")
    with pytest.raises(GpuOpsError, match="batch_size >= 1"):
        mr.plan_rollout(HOSTS, nodes(), "mixed", batch_size=0)


def test_budget():
    ns = [node("a", state="failed"), node("b", state="failed"), node("c", state="success")]
    for n, rid in zip(ns, ("r1", "r0", "r1")):
        n["metadata"]["labels"][mr.LABEL_ROLLOUT] = rid
    assert mr.budget_left(ns, "r1", 0) == {"failed": ["a"], "exhausted": True}
    assert mr.budget_left(ns, "r1", 1) == {"failed": ["a"], "exhausted": False}


def test_expected_resources():
    n = node("a", alloc={"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-3g.40gb": "4", "cpu": "64"})
    assert mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-3g.40gb": 4})
    assert not mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 8})  # stale 3g resource left
    assert not mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 56})


def test_inventory_drift_allows_untouched_and_matching_nodes():
    assert mr.inventory_drift({}, "all-1g.10gb") == ""
    assert mr.inventory_drift(node("a"), "all-1g.10gb") == ""  # set up by gpu_nodes.yml, never rolled out
    assert mr.inventory_drift(node("a", "all-1g.10gb", "success"), "all-1g.10gb") == ""
    # a failed rollout restored the last good layout, which is the inventory's
    assert mr.inventory_drift(node("a", "all-1g.10gb", "failed"), "all-1g.10gb") == ""


def test_inventory_drift_refuses_to_undo_a_rollout():
    msg = mr.inventory_drift(node("gpu-7", "mixed-a100", "success"), "all-1g.10gb", host="gpu7")
    assert "'mixed-a100'" in msg and "'all-1g.10gb'" in msg
    assert "mig_reconfigure.yml -e target=gpu7 -e mig_reconfigure_config=all-1g.10gb" in msg
    assert "gpuops_mig_config: mixed-a100" in msg and "gpu_nodes_mig_guard=false" in msg
    failed = mr.inventory_drift(node("gpu-7", "all-1g.10gb", "failed"), "mixed-a100")
    assert "state failed" in failed and "target=gpu-7" in failed


def test_inventory_drift_refuses_a_node_under_a_rollout():
    n = node("gpu-7", "mixed-a100", "pending")
    n["metadata"]["labels"][mr.LABEL_ROLLOUT] = "r20261202"
    for config in ("mixed-a100", "all-1g.10gb"):
        msg = mr.inventory_drift(n, config)
        assert "middle of a MIG rollout to 'mixed-a100'" in msg and "rollout r20261202" in msg, msg
