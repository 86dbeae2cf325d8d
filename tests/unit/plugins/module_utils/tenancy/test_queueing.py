"""Unit tests of the Kueue objects for GPU tenants (plugins/module_utils/tenancy/queueing.py)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import validate as gv
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import queueing as gpu_queueing
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import quotas
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import labels as gpu_labels
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

CLASSES = {"gpu-high": {"value": 100000, "preemption_policy": "PreemptLowerPriority", "description": "high"},
           "gpu-low": {"value": 1000, "preemption_policy": "Never"}}


def _node(name, gpus, mig_strategy="none", mig_config=None, unschedulable=False):
    state = gpu_labels.node_gpu_state(gpus=gpus, mig_strategy=mig_strategy, mig_config=mig_config)
    return {"metadata": {"name": name, "labels": state["labels"]},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"allocatable": dict(state["capacity"], cpu="64")}}


def _nodes():
    return [_node("a100", [{"model": "a100_80gb", "count": 2}], "mixed", {"1g.10gb": 7}),
            _node("h100", [{"model": "h100_80gb", "count": 4}])]


def _tenants(*specs):
    tenants, _w = quotas.validate_tenants(list(specs), quotas.validate_priority_classes(CLASSES))
    return tenants


def test_flavors_per_product_and_mig_profile():
    flavors = gpu_queueing.node_flavors(_nodes() + [_node("off", [{"model": "h100_80gb", "count": 8}], unschedulable=True)])
    assert len(flavors) == 2 and sorted(flavors)[1] == "mig-1g.10gb"
    mig = flavors["mig-1g.10gb"]
    assert mig["resource"] == "nvidia.com/mig-1g.10gb" and mig["quantity"] == 14
    assert mig["node_labels"] == {"nvidia.com/mig.strategy": "mixed"}
    gpu = [f for f in flavors if f.startswith("gpu-")]
    assert len(gpu) == 1 and flavors[gpu[0]]["quantity"] == 4  # the unschedulable node is left out
    assert flavors[gpu[0]]["node_labels"]["nvidia.com/gpu.product"].startswith("NVIDIA-H100")


def test_plan_two_tenants_one_cohort():
    tenants = _tenants(
        {"name": "team-a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 4}},
         "queueing": {"borrowing_limit": {"nvidia.com/mig-1g.10gb": 6}}},
        {"name": "team-b", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 6, "requests.nvidia.com/gpu": 2}},
         "queueing": {"lending_limit": {"nvidia.com/mig-1g.10gb": 6}}})
    result, warnings = gpu_queueing.plan(tenants, _nodes(), CLASSES, cohort="lab")
    assert warnings == []
    assert [f["metadata"]["name"] for f in result["flavors"]][-1] == "mig-1g.10gb"
    cq = dict((c["metadata"]["name"], c) for c in result["cluster_queues"])
    assert cq["team-a"]["spec"]["cohortName"] == "lab"
    assert cq["team-a"]["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    groups = dict((g["coveredResources"][0], g) for g in cq["team-a"]["spec"]["resourceGroups"])
    mig = groups["nvidia.com/mig-1g.10gb"]["flavors"][0]["resources"][0]
    assert mig == {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "4", "borrowingLimit": "6"}
    # team-a has no whole GPUs but lists the flavor (nominal 0) so it can borrow it
    assert groups["nvidia.com/gpu"]["flavors"][0]["resources"][0]["nominalQuota"] == "0"
    groups_b = dict((g["coveredResources"][0], g) for g in cq["team-b"]["spec"]["resourceGroups"])
    assert groups_b["nvidia.com/mig-1g.10gb"]["flavors"][0]["resources"][0]["lendingLimit"] == "6"
    assert cq["team-b"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "team-b"}}
    lq = result["local_queues"][0]
    assert lq["metadata"] == {"name": "gpu", "namespace": "team-a", "labels": {"gpuops.k8s/tenant": "team-a"}}
    assert lq["spec"] == {"clusterQueue": "team-a"}
    assert [(w["metadata"]["name"], w["value"]) for w in result["priority_classes"]] == [
        ("gpu-high", 100000), ("gpu-low", 1000)]
    cap = result["capacity"]["flavors"]["mig-1g.10gb"]
    assert (cap["quota"], cap["offered"], cap["overcommitted"]) == (10, 14, False)


def test_capacity_check_per_flavor_fails_before_anything():
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 10}}},
                       {"name": "b", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 5}}})
    with pytest.raises(GpuOpsError, match=r"mig-1g.10gb \(nvidia.com/mig-1g.10gb\): tenants 15 > nodes offer 14 "
                                          r"\(a=10, b=5\)"):
        gpu_queueing.plan(tenants, _nodes(), CLASSES)
    result, warnings = gpu_queueing.plan(tenants, _nodes(), CLASSES, capacity_policy="warn")
    assert result["capacity"]["overcommitted"] == ["mig-1g.10gb"] and "over capacity" in warnings[0]


def test_resource_nobody_offers_names_what_is_offered():
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-3g.40gb": 1}}})
    with pytest.raises(GpuOpsError, match="no node offers nvidia.com/mig-3g.40gb; resources the nodes offer: "
                                          "nvidia.com/gpu, nvidia.com/mig-1g.10gb"):
        gpu_queueing.plan(tenants, _nodes(), CLASSES)


def test_several_gpu_products_need_a_split():
    nodes = _nodes() + [_node("l40s", [{"model": "l40s_48gb", "count": 4}])]
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/gpu": 3}}})
    with pytest.raises(GpuOpsError, match="split them with queueing.flavors"):
        gpu_queueing.plan(tenants, nodes, CLASSES)
    names = sorted(gpu_queueing.node_flavors(nodes))
    gpu_flavors = [n for n in names if n.startswith("gpu-")]
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/gpu": 3}},
                        "queueing": {"flavors": {gpu_flavors[0]: 1, gpu_flavors[1]: 2}}})
    result, _w = gpu_queueing.plan(tenants, nodes, CLASSES)
    assert result["nominal"]["a"] == {gpu_flavors[0]: 1, gpu_flavors[1]: 2}
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/gpu": 3}},
                        "queueing": {"flavors": {"gpu-nope": 3}}})
    with pytest.raises(GpuOpsError, match="no node offers flavor 'gpu-nope'"):
        gpu_queueing.plan(tenants, nodes, CLASSES)


def test_preemption_mapping_and_bad_input():
    assert gpu_queueing.preemption_from_classes({"x": {"value": 1, "preemption_policy": "Never"}}) == {
        "withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    with pytest.raises(GpuOpsError, match="valid values: Never, LowerPriority, Any"):
        gpu_queueing.preemption_from_classes(CLASSES, reclaim="Always")
    with pytest.raises(GpuOpsError, match="DNS-1123 subdomain"):
        gpu_queueing.plan([], [], CLASSES, cohort="Bad_Cohort")
    tenants = _tenants({"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 1}},
                        "queueing": {"borrow": {}}})
    with pytest.raises(GpuOpsError, match="borrowing_limit"):
        gpu_queueing.plan(tenants, _nodes(), CLASSES)


def test_run_validate_queueing_component():
    result, warnings = gv.run_validate({
        "component": "queueing", "priority_classes": CLASSES, "nodes": _nodes(),
        "tenants": [{"name": "a", "quota": {"hard": {"limits.nvidia.com/mig-1g.10gb": 2}}}],
        "queueing": {"cohort": "c1", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}})
    q = result["queueing"]
    assert q["nominal"] == {"a": {"mig-1g.10gb": 2}}
    assert all(f["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}] for f in q["flavors"])
    assert any("limits.nvidia.com/mig-1g.10gb is never enforced" in w for w in warnings)
