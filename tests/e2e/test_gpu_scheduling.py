"""Proof tests on a real control plane: MIG resources, GPU quotas, preemption, DaemonSets on GPU nodes.

Every test makes its own kwok nodes carrying a unique ``e2e-run`` label and pins its pods to them
with a nodeSelector, so nodes of a reused cluster (make cluster-up) never interfere.
"""
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib.wait import pod_manifest, wait_for


def _pod(core, ns, name):
    return core.read_namespaced_pod(name, ns)


def _running_on(core, ns, name):
    p = _pod(core, ns, name)
    return p.spec.node_name if p.status.phase == "Running" else None


def _unschedulable_message(core, ns, name):
    p = _pod(core, ns, name)
    for c in p.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return c.message
    return None


def test_kwok_node_ready_with_gpu_capacity(k8s_cluster, kwok_nodes, unique):
    """kwok keeps the fake node Ready and leaves the device plugin's capacity alone."""
    name = kwok_nodes("e2e-h100-" + unique, gpus=[{"model": "h100_80gb", "count": 8}],
                      labels={"e2e-run": unique})

    def ready():
        n = k8s_cluster.core.read_node(name)
        return any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or []) and n

    node = wait_for(ready, 60, what="node %s Ready" % name)
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.status.capacity["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node.metadata.labels["nvidia.com/gpu.present"] == "true"


def test_mig_pod_lands_on_advertising_node_and_pends_when_none_free(k8s_cluster, kwok_nodes, namespace,
                                                                    unique):
    core = k8s_cluster.core
    sel = {"e2e-run": unique}
    mig_node = kwok_nodes("e2e-mig-" + unique, gpus=[{"model": "a100_80gb", "count": 1}],
                          mig_strategy="mixed", mig_config={"1g.10gb": 2, "3g.40gb": 1}, labels=sel)
    kwok_nodes("e2e-full-" + unique, gpus=[{"model": "a100_80gb", "count": 8}], labels=sel)
    assert core.read_node(mig_node).status.allocatable["nvidia.com/mig-1g.10gb"] == "2"

    for i in range(2):
        core.create_namespaced_pod(namespace, pod_manifest(
            "mig-%d" % i, {"nvidia.com/mig-1g.10gb": 1}, node_selector=sel))
    for i in range(2):
        node = wait_for(lambda: _running_on(core, namespace, "mig-%d" % i), 60, what="mig-%d Running" % i)
        assert node == mig_node

    core.create_namespaced_pod(namespace, pod_manifest("mig-2", {"nvidia.com/mig-1g.10gb": 1}, node_selector=sel))
    msg = wait_for(lambda: _unschedulable_message(core, namespace, "mig-2"), 60, what="mig-2 Unschedulable")
    assert "Insufficient nvidia.com/mig-1g.10gb" in msg
    assert _pod(core, namespace, "mig-2").status.phase == "Pending"
    assert _pod(core, namespace, "mig-2").spec.node_name is None


def test_resource_quota_rejects_third_gpu_pod(k8s_cluster, namespace):
    core = k8s_cluster.core
    core.create_namespaced_resource_quota(namespace, {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}})
    # admission needs the quota controller to have computed the status first
    wait_for(lambda: (core.read_namespaced_resource_quota("gpu", namespace).status.hard or {}).get(
        "requests.nvidia.com/gpu"), 60, what="quota status")
    for i in range(2):
        core.create_namespaced_pod(namespace, pod_manifest("gpu-%d" % i, {"nvidia.com/gpu": 1}))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, pod_manifest("gpu-2", {"nvidia.com/gpu": 1}))
    assert err.value.status == 403
    assert "exceeded quota: gpu" in err.value.body
    assert "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2" \
        in err.value.body
    used = wait_for(lambda: (core.read_namespaced_resource_quota("gpu", namespace).status.used or {}).get(
        "requests.nvidia.com/gpu"), 30, what="quota usage")
    assert used == "2"


def test_high_priority_pod_preempts_low_priority_pod(k8s_cluster, kwok_nodes, namespace, unique):
    core = k8s_cluster.core
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    sel = {"e2e-run": unique}
    node = kwok_nodes("e2e-l40s-" + unique, gpus=[{"model": "l40s_48gb", "count": 2}], labels=sel)
    low, high = "e2e-low-" + unique, "e2e-high-" + unique
    sched.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": low}, "value": 100})
    sched.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                 "metadata": {"name": high}, "value": 100000})
    try:
        for i in range(2):
            core.create_namespaced_pod(namespace, pod_manifest(
                "low-%d" % i, {"nvidia.com/gpu": 1}, node_selector=sel, priority_class=low))
        for i in range(2):
            assert wait_for(lambda: _running_on(core, namespace, "low-%d" % i), 60) == node
        assert _pod(core, namespace, "low-0").spec.priority == 100

        core.create_namespaced_pod(namespace, pod_manifest(
            "high", {"nvidia.com/gpu": 1}, node_selector=sel, priority_class=high))
        assert wait_for(lambda: _running_on(core, namespace, "high"), 90, what="high Running") == node
        remaining = [p.metadata.name for p in core.list_namespaced_pod(namespace).items
                     if p.metadata.name.startswith("low-") and p.metadata.deletion_timestamp is None]
        assert len(remaining) == 1, remaining
        events = core.list_namespaced_event(namespace).items
        assert any(e.reason == "Preempted" for e in events), [(e.reason, e.message) for e in events]
    finally:
        sched.delete_priority_class(low)
        sched.delete_priority_class(high)


def test_daemonset_with_gpu_node_selector_lands_only_on_gpu_nodes(k8s_cluster, kwok_nodes, namespace, unique):
    core = k8s_cluster.core
    apps = client.AppsV1Api(k8s_cluster.api_client())
    sel = {"e2e-run": unique}
    gpu_a = kwok_nodes("e2e-gpu-a-" + unique, gpus=[{"model": "h100_80gb", "count": 8}], labels=sel)
    gpu_b = kwok_nodes("e2e-gpu-b-" + unique, gpus=[{"model": "a100_80gb", "count": 8}], mig_strategy="mixed",
                       mig_config={"3g.40gb": 2}, labels=sel)
    cpu = kwok_nodes("e2e-cpu-" + unique, labels=sel)
    selector = {"nvidia.com/gpu.present": "true", "e2e-run": unique}
    apps.create_namespaced_daemon_set(namespace, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpu-agent"},
        "spec": {"selector": {"matchLabels": {"app": "gpu-agent"}},
                 "template": {"metadata": {"labels": {"app": "gpu-agent"}},
                              "spec": {"nodeSelector": selector,
                                       "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.10"}]}}}})

    def ready():
        ds = apps.read_namespaced_daemon_set("gpu-agent", namespace)
        st = ds.status
        return st.desired_number_scheduled == 2 and st.number_ready == 2 and ds

    wait_for(ready, 90, what="DaemonSet ready on 2 nodes")
    pods = core.list_namespaced_pod(namespace, label_selector="app=gpu-agent").items
    assert sorted(p.spec.node_name for p in pods) == sorted([gpu_a, gpu_b])
    assert cpu not in [p.spec.node_name for p in pods]
    assert all(p.status.phase == "Running" for p in pods)
