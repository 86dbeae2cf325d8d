# -*- coding: utf-8 -*-
"""A cluster's GPU pod history from kube-state-metrics (metrics/pod_history.py), against recorded query_range answers
(data/pod_history_window.json: Prometheus' JSON, written by hand) served by a local fake Prometheus.

The window: T0 = 1800000000 to T0 + 600 s, step 60 s (10 samples at T0 + 60 ... T0 + 600). The pods:

* team-a/train-1: 2 x nvidia.com/gpu, 4 CPUs, 16 GiB, priority class high; created T0 - 300 (before the window: it
  arrives at 0); completion time T0 + 250 (then Succeeded, kept as an object to the end) -> 0 .. 250 s;
* team-a/infer-1: one nvidia.com/mig-3g.40gb, no priority class, created T0 + 100, scheduled T0 + 110, Running to the
  end -> 100 .. 600 (the window's length), running_at_end; gpu_milli = floor(1000 x min(3/7, 4/8)) = 428;
* team-b/job-2: 1 GPU, low, created T0 + 130, last seen at T0 + 420 (no completion, no deletion time) -> 130 .. 420;
* team-b/job-3: 1 GPU, low, created T0 + 200, deletion timestamp T0 + 530, last seen T0 + 540 -> 200 .. 530;
* team-a/old: completed at T0 - 500, kept as an object: not a pod of the window;
* team-a/stuck: deletion timestamp T0 - 100 (its grace period over before the window), kept Running by a finalizer
  to the end: not a pod of the window either.
"""
import csv
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import pod_history  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import Prometheus  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig  # noqa: E402
from fake_prometheus import FakePrometheus  # noqa: E402

T0 = 1800000000
PARAMS = {"start": str(T0), "end": str(T0 + 600), "step": "60s", "tenants": {"team-b": "research"}}
EMPTY = {"status": "success", "data": {"resultType": "matrix", "result": []}}


def recorded():
    with open(os.path.join(HERE, "data", "pod_history_window.json")) as f:
        return json.load(f)


class Recorded(FakePrometheus):
    """Answers each range query pod_history sends with its recorded body (by query name); anything else empty."""

    def __init__(self, bodies, extra=None):
        FakePrometheus.__init__(self)
        self.bodies = bodies
        self.extra = extra or {}
        self.names = dict((q, name) for name, q in pod_history.queries("60s", "team").items())

    def answer(self, path, params, auth):
        if path != "/api/v1/query_range":
            return FakePrometheus.answer(self, path, params, auth)
        q = params["query"]
        name = self.names.get(q)
        body = self.bodies.get(name) if name else self.extra.get(q)
        return 200, body or EMPTY, "application/json"


@pytest.fixture
def serve():
    servers = []

    def start(bodies, extra=None):
        s = Recorded(bodies, extra)
        servers.append(s)
        return Prometheus(s.url)
    yield start
    for s in servers:
        s.stop()


def by_name(result):
    return dict((p["name"], p) for p in result["pods"])


def test_pods_come_back_with_their_requests_and_times(serve):
    out = pod_history.read_pods(serve(recorded()), PARAMS)
    pods = by_name(out)
    # not team-a/old, not team-a/stuck
    assert sorted(pods) == ["team-a/infer-1", "team-a/train-1", "team-b/job-2", "team-b/job-3"]
    assert out["window"]["seconds"] == 600 and out["no_data"] is False
    t = pods["team-a/train-1"]
    assert (t["num_gpu"], t["gpu_milli"], t["cpu_milli"], t["memory_mib"]) == (2, 1000, 4000, 16384)
    assert (t["creation_time"], t["deletion_time"], t["qos"], t["pod_phase"]) == (0, 250, "high", "Succeeded")
    assert t["running_at_end"] is False and t["tenant"] == "team-a"
    j2 = pods["team-b/job-2"]
    assert (j2["creation_time"], j2["deletion_time"], j2["num_gpu"], j2["gpu_milli"]) == (130, 420, 1, 1000)
    assert (j2["cpu_milli"], j2["memory_mib"], j2["qos"], j2["tenant"]) == (500, 1024, "low", "research")
    j3 = pods["team-b/job-3"]
    assert (j3["creation_time"], j3["deletion_time"], j3["cpu_milli"]) == (200, 530, 0)
    # by creation
    assert [p["name"] for p in out["pods"]] == ["team-a/train-1", "team-a/infer-1", "team-b/job-2", "team-b/job-3"]
    # peak over 200..250 s: 2 + 0.428 + 1 + 1; GPU-hours 2 x 250 + 0.428 x 500 + 290 + 330 (GPU-seconds) / 3600
    assert out["peak_gpus"] == 4.428
    assert out["gpu_hours"] == pytest.approx((500 + 214 + 290 + 330) / 3600.0, abs=1e-4)
    assert [(r["name"], r["pods"]) for r in out["tenants"]] == [("team-a", 2), ("research", 2)]
    assert out["message"] == "4 GPU pods in the window (1 still running at its end)"


def test_a_pod_still_running_at_the_end_and_a_mig_pod(serve):
    p = by_name(pod_history.read_pods(serve(recorded()), PARAMS))["team-a/infer-1"]
    assert p["running_at_end"] is True and p["pod_phase"] == "Running"
    assert (p["creation_time"], p["scheduled_time"], p["deletion_time"]) == (100, 110, 600)
    assert (p["num_gpu"], p["gpu_milli"], p["gpu_resource"]) == (1, 428, "nvidia.com/mig-3g.40gb=1")


def test_mig_shares_map_back_to_their_profile_in_the_whatif():
    a100 = gpu_catalog.find_model("a100_80gb")
    assert pod_history.mig_milli("3g.40gb", a100) == 428  # min(3/7, 4/8)
    assert pod_history.mig_milli("1g.10gb", a100) == 125  # min(1/7, 1/8)
    assert pod_history.mig_milli("1c.3g.40gb", a100) == 428  # a compute instance holds its GPU instance
    assert pod_history.mig_milli("4g.40gb", a100) == 500  # min(4/7, 4/8)
    table = whatif_mig.UnitTable()
    kinds = [table.kind(a100, p) for p in a100.profiles]
    for prof in ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb"):
        k = whatif_mig.request_kind(table, kinds, pod_history.mig_milli(prof, a100))
        assert table.name(k) == prof
    with pytest.raises(GpuOpsError, match="'5g.50gb'.*known profiles: .*1g.10gb"):
        pod_history.mig_milli("5g.50gb")


def test_a_pod_with_no_priority_class_has_no_qos_in_the_whatif(serve, tmp_path):
    out = pod_history.run(dict(PARAMS, pods_csv=str(tmp_path / "pods.csv")), client=serve(recorded()))
    pods = dict((p.name, p) for p in whatif_data.read_pods_csv(out["pods_csv"]["path"]))
    assert pods["team-a/infer-1"].qos is None and pods["team-a/train-1"].qos == "high"
    assert (pods["team-a/infer-1"].gpu_milli, pods["team-a/infer-1"].deletion_time) == (428, 600.0)
    assert (pods["team-b/job-3"].creation_time, pods["team-b/job-3"].deletion_time) == (200.0, 530.0)
    with open(out["pods_csv"]["path"]) as f:
        header = next(csv.reader(f))
    assert header[:11] == ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                           "creation_time", "deletion_time", "scheduled_time"]


def test_the_csv_is_written_once_and_not_in_check_mode(serve, tmp_path):
    path = tmp_path / "h" / "pods.csv"
    client = serve(recorded())
    out = pod_history.run(dict(PARAMS, pods_csv=str(path)), check_mode=True, client=client)
    assert out["changed"] is True and not path.exists()
    assert pod_history.run(dict(PARAMS, pods_csv=str(path)), client=client)["changed"] is True
    assert pod_history.run(dict(PARAMS, pods_csv=str(path)), client=client)["changed"] is False


def test_the_pool_is_twice_the_peak_in_whole_nodes(serve):
    out = pod_history.run(PARAMS, client=serve(recorded()))
    # 2 x 4.428 = 8.856 -> 9 GPUs -> two nodes of 8
    assert out["pool_gpus"] == 16 and [n["name"] for n in out["nodes"]] == ["pool-1", "pool-2"]
    assert out["nodes"][0]["gpus"] == [{"model": "a100_80gb", "count": 8}]
    nodes = pod_history.pool_nodes({"model": "h100_80gb", "gpus_per_node": 4, "gpus": 10}, 1.0)
    assert len(nodes) == 3 and nodes[2]["gpus"] == [{"model": "h100_80gb", "count": 4}]
    with pytest.raises(GpuOpsError, match="valid: model, gpus_per_node, gpus"):
        pod_history.pool_nodes({"size": 3}, 1.0)


@pytest.mark.parametrize("name, metric", [("info", "kube_pod_info"), ("created", "kube_pod_created"),
                                          ("phase", "kube_pod_status_phase")])
def test_a_missing_series_names_the_metric(serve, name, metric):
    bodies = recorded()
    del bodies[name]
    with pytest.raises(GpuOpsError, match="no series of %s for the 6 GPU pods" % metric) as e:
        pod_history.read_pods(serve(bodies), PARAMS)
    assert e.value.details["metric"] == metric


def test_no_kube_state_metrics_at_all_names_the_requests_metric(serve):
    with pytest.raises(GpuOpsError, match="no series of kube_pod_container_resource_requests.*kube-state-metrics"):
        pod_history.read_pods(serve({}), PARAMS)


def test_a_window_without_gpu_pods_says_so(serve):
    cpu_only = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {}, "values": [[T0 + 60, "12"], [T0 + 120, "12"]]}]}}
    out = pod_history.run(PARAMS, client=serve({}, {"count(kube_pod_container_resource_requests)": cpu_only}))
    assert out["no_data"] is True and out["pods"] == []
    assert out["message"].startswith("no pod requested a GPU (nvidia.com/*) in the window 2027-01-15T08:00:00Z")


def test_shared_replicas_and_unknown_resources():
    assert pod_history.gpu_shape({"nvidia_com_gpu_shared": 1}, "n1", {"nvidia.com/gpu.shared": 4}) == (1, 250, [])
    assert pod_history.gpu_shape({"nvidia_com_gpu": 1}, "ts-node", {"ts-node": 2}) == (1, 500, [])
    with pytest.raises(GpuOpsError, match="give shared_replicas"):
        pod_history.gpu_shape({"nvidia_com_gpu_shared": 1}, "n1", {})
    with pytest.raises(GpuOpsError, match="valid: nvidia.com/gpu, nvidia.com/gpu.shared"):
        pod_history.gpu_shape({"nvidia_com_gpu_foo": 1}, "n1", {})


def test_the_queries_use_the_verified_series_and_labels():
    q = pod_history.queries("60s", "team")
    assert q["gpu"].startswith("sum by (namespace, pod, uid, resource) (max by (namespace, pod, uid, resource, container)")
    assert 'kube_pod_container_resource_requests{resource=~"nvidia_com_.*"}[60s]' in q["gpu"]
    assert "max by (namespace, pod, uid, node, priority_class) (last_over_time(kube_pod_info[60s]))" in q["info"]
    assert "kube_pod_deletion_timestamp[60s]" in q["deleted"] and "kube_pod_completion_time[60s]" in q["completed"]
    assert q["namespaces"] == "max by (namespace, label_team) (last_over_time(kube_namespace_labels[60s]))"
    assert "label_gpuops_io_cost_center" in pod_history.queries("60s", "gpuops.io/costCenter")["namespaces"]
    own = pod_history.queries("60s", namespaces=["team-a", "ml-x"])
    sel = 'kube_pod_container_resource_requests{resource=~"nvidia_com_.*", namespace=~"team-a|ml-x"}[60s]'
    assert all(sel in own[k] for k in own), own
    with pytest.raises(GpuOpsError, match="'ml.x' is not a namespace name"):
        pod_history.queries("60s", namespaces=["ml.x"])
