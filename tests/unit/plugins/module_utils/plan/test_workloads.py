"""Unit tests of plan/workloads.py: which demand item a pod belongs to."""
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import workloads

ITEMS = [("search", "embedder"), ("search", "embedder-large"), ("chat", "llm-13b")]


def test_the_label_decides_when_present():
    labels = workloads.pod_labels("search", "embedder-large")
    assert labels == {"gpuops.k8s/tenant": "search", "gpuops.k8s/demand-item": "embedder-large"}
    # a pod named like another item still belongs to the item its label names
    assert workloads.item_for_pod("search", "embedder-7d9f8b6c4-x2k9p", ITEMS, labels) == ("search", "embedder-large")
    # a label naming no item of that tenant maps to nothing (no fallback to the name)
    assert workloads.item_for_pod("chat", "embedder-7d9f8b6c4-x2k9p", ITEMS, labels) is None


def test_workload_names_of_the_controllers():
    assert workloads.workload_of("embedder-large-7d9f8b6c4-x2k9p") == "embedder-large"   # Deployment
    assert workloads.workload_of("llm-13b-0") == "llm-13b"                                # StatefulSet
    assert workloads.workload_of("finetune-q7x2v") == "finetune"                          # Job
    assert workloads.workload_of("notebook") == "notebook"                                # bare pod
    assert workloads.workload_of("whatever", {"kind": "ReplicaSet", "name": "embedder-large-7d9f8b6c4"}) == "embedder-large"
    assert workloads.workload_of("whatever", {"kind": "StatefulSet", "name": "llm-13b"}) == "llm-13b"


def test_items_by_workload_name_and_namespace():
    assert workloads.item_for_pod("search", "embedder-7d9f8b6c4-x2k9p", ITEMS) == ("search", "embedder")
    assert workloads.item_for_pod("search", "embedder-large-7d9f8b6c4-x2k9p", ITEMS) == ("search", "embedder-large")
    assert workloads.item_for_pod("chat", "embedder-7d9f8b6c4-x2k9p", ITEMS) is None       # other tenant
    grouped, other = workloads.group_pods(
        [{"namespace": "chat", "name": "llm-13b-0"}, {"namespace": "chat", "name": "llm-13b-1"},
         {"namespace": "chat", "name": "redis-0"}], ITEMS)
    assert sorted(grouped) == [("chat", "llm-13b")] and len(grouped[("chat", "llm-13b")]) == 2
    assert [p["name"] for p in other] == ["redis-0"]
