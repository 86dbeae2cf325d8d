# -*- coding: utf-8 -*-
"""GPU usage and chargeback (metrics/usage.py, metrics/usage_report.py) against a local canned Prometheus."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import usage, usage_report  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics.prometheus import Prometheus  # noqa: E402
from fake_prometheus import FakePrometheus  # noqa: E402

T0 = 1800000000.0  # a multiple of 900 s
STEP = 900.0  # 15 minutes: 12 samples in 3 hours, each standing for 0.25 h
A100 = "NVIDIA A100-SXM4-80GB"


def _at(steps, value):
    """Samples at the end of each step index in ``steps`` (step i ends at T0 + (i + 1) * STEP)."""
    return [(T0 + (i + 1) * STEP, value) for i in steps]


def two_tenants():
    """The hand-worked example, 3 hours, step 15 min.

    team-a: a-train (a Job) holds one whole A100 80GB for the first 2 h at engine activity 0.5, 60 GiB of its 80 GiB
    used; then the GPU sits free (no pod labels) while a-wait (a Job asking one nvidia.com/gpu) is Pending for 1 h.
    team-b: b-serve (a Deployment's pod) holds one 3g.40gb slice of another A100 for 3 h at activity 0 with 1 GiB used.
    """
    dev_a = {"Hostname": "n1", "UUID": "GPU-a", "gpu": "0", "modelName": A100}
    dev_b = {"Hostname": "n1", "UUID": "GPU-b", "gpu": "1", "modelName": A100, "GPU_I_PROFILE": "3g.40gb",
             "GPU_I_ID": "1"}
    a_train = {"namespace": "team-a", "pod": "a-train"}
    a_wait = {"namespace": "team-a", "pod": "a-wait"}
    b_serve = {"namespace": "team-b", "pod": "b-serve-5d8f7c9b4-x2x9z"}
    first2h, last1h, all3h = range(0, 8), range(8, 12), range(0, 12)
    return {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": [
            (dict(dev_a, **a_train), _at(first2h, 0.5)), (dev_a, _at(last1h, 0.0)),
            (dict(dev_b, **b_serve), _at(all3h, 0.0))],
        "DCGM_FI_DEV_FB_USED": [
            (dict(dev_a, **a_train), _at(first2h, 61440)), (dev_a, _at(last1h, 0)),
            (dict(dev_b, **b_serve), _at(all3h, 1024))],
        "kube_pod_container_resource_requests": [
            (dict(a_train, resource="nvidia_com_gpu"), _at(first2h, 1)),
            (dict(a_wait, resource="nvidia_com_gpu"), _at(last1h, 1)),
            (dict(b_serve, resource="nvidia_com_mig_3g_40gb"), _at(all3h, 1))],
        "kube_pod_status_phase": [
            (dict(a_train, phase="Running"), _at(first2h, 1)), (dict(a_wait, phase="Pending"), _at(last1h, 1)),
            (dict(b_serve, phase="Running"), _at(all3h, 1))],
        "kube_pod_info": [
            (dict(a_train, node="n1", created_by_kind="Job", created_by_name="a-train"), _at(first2h, 1)),
            (dict(a_wait, created_by_kind="Job", created_by_name="a-wait"), _at(last1h, 1)),
            (dict(b_serve, node="n1", created_by_kind="ReplicaSet", created_by_name="b-serve-5d8f7c9b4"),
             _at(all3h, 1))],
    }


def matrices(data):
    def answer(query, start, end, step):
        for metric, rows in data.items():
            if metric in query:
                return [(labels, [(t, v) for t, v in values if start <= t <= end]) for labels, values in rows]
        return []
    return answer


PARAMS = {"start": T0, "end": T0 + 3 * 3600, "step": "15m", "idle_min_duration": "1h"}


@pytest.fixture
def fake():
    f = FakePrometheus(matrices=matrices(two_tenants()))
    yield f
    f.stop()


def _row(rows, name):
    return [r for r in rows if r["name"] == name][0]


def test_two_tenants_worked_by_hand(fake):
    res = usage_report.usage_report(Prometheus(fake.url), PARAMS)
    assert res["no_data"] is False and res["window"]["hours"] == 3.0
    a, b = _row(res["tenants"], "team-a"), _row(res["tenants"], "team-b")
    # team-a: 1 GPU x 8 steps x 0.25 h = 2 GPU-h allocated; x 0.5 activity = 1 GPU-h active
    assert a["allocated_gpu_hours"] == pytest.approx(2.0) and a["active_gpu_hours"] == pytest.approx(1.0)
    assert a["active_pct"] == pytest.approx(50.0)
    # memory: 60 GiB x 2 h = 120 GiB-h used of 80 GiB (81920 MiB) x 2 h = 160 GiB-h allocated
    assert a["memory_used_gib_hours"] == pytest.approx(120.0) and a["memory_allocated_gib_hours"] == pytest.approx(160.0)
    # at the catalog's A100 80GB price, 3.5 USD per GPU-hour: 2 x 3.5 = 7.0 allocated, 1 x 3.5 = 3.5 active
    assert a["cost_allocated"] == pytest.approx(7.0) and a["cost_active"] == pytest.approx(3.5)
    # a-wait pending 1 h for 1 GPU while a-train's GPU sat free: 1 GPU-h pending, all of it while a GPU was free
    assert a["pending_gpu_hours"] == pytest.approx(1.0) and a["pending_while_free_gpu_hours"] == pytest.approx(1.0)
    # team-b: 3g.40gb on an A100 = 3 of 7 compute slices; x 12 steps x 0.25 h = 9/7 GPU-h allocated, none active
    assert b["allocated_gpu_hours"] == pytest.approx(9 / 7.0, abs=1e-4) and b["active_gpu_hours"] == 0.0
    assert b["active_pct"] == 0.0
    # 1 GiB x 3 h used; the profile's 40192 MiB = 39.25 GiB x 3 h = 117.75 GiB-h allocated
    assert b["memory_used_gib_hours"] == pytest.approx(3.0) and b["memory_allocated_gib_hours"] == pytest.approx(117.75)
    assert b["cost_allocated"] == pytest.approx(9 / 7.0 * 3.5, abs=1e-3) and b["cost_active"] == 0.0  # 4.5 USD
    # the idle holder: b-serve, under 5 % for 3 h (over the 1 h minimum): 3 h, 9/7 GPU-h, 4.5 USD
    assert [(r["tenant"], r["pod"], r["workload"]) for r in res["idle_holders"]] == [
        ("team-b", "b-serve-5d8f7c9b4-x2x9z", "team-b/b-serve")]
    idle = res["idle_holders"][0]
    assert idle["idle_hours"] == pytest.approx(3.0) and idle["idle_cost"] == pytest.approx(4.5, abs=1e-3)
    # waste: b-serve is serving (a ReplicaSet's pod) at 0 % < 20 %: all its 9/7 GPU-h; a-wait's 1 GPU-h pending
    # while free; a-train needs 0.75 of its GPU (60 of 80 GiB) - not small, not oversized
    waste = dict((w["category"], w["gpu_hours"]) for w in res["waste"])
    assert waste == pytest.approx({"low_activity_inference": 9 / 7.0, "whole_gpu_small_job": 0.0,
                                   "pending_while_free": 1.0, "request_mismatch": 0.0}, abs=1e-4)
    assert res["totals"]["allocated_gpu_hours"] == pytest.approx(2 + 9 / 7.0, abs=1e-4)
    assert [r["name"] for r in res["profiles"]] == ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb"]
    assert _row(res["models"], "a100_80gb")["allocated_gpu_hours"] == pytest.approx(2 + 9 / 7.0, abs=1e-4)
    assert res["warnings"] == []


def test_tenants_mapping_and_user_prices(fake):
    res = usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, tenants={"team-a": "org", "team-b": "org"},
                                                               prices={"a100_80gb": 2.0}))
    assert [r["name"] for r in res["tenants"]] == ["org"]
    # (2 + 9/7) GPU-h x 2.0 USD = 46/7 = 6.571 USD allocated; 1 GPU-h x 2.0 = 2.0 active
    org = res["tenants"][0]
    assert org["cost_allocated"] == pytest.approx(46 / 7.0, abs=1e-3) and org["cost_active"] == pytest.approx(2.0)


def test_idle_needs_the_minimum_duration(fake):
    res = usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, idle_min_duration="4h"))
    assert res["idle_holders"] == []  # 3 h idle is under 4 h


def test_time_sliced_replica_counts_its_share():
    grid = usage.Grid(T0, T0 + 3600, STEP)  # 4 steps
    pod = {"namespace": "t", "pod": "p"}
    dev = {"Hostname": "n2", "UUID": "GPU-c", "gpu": "0", "modelName": "NVIDIA L4"}
    series = {"requests": [{"metric": dict(pod, resource="nvidia_com_gpu_shared"), "values": _at(range(4), 1)}],
              "phase": [{"metric": dict(pod, phase="Running"), "values": _at(range(4), 1)}],
              "compute": [{"metric": dict(dev, **pod), "values": _at(range(4), 0.8)}]}
    # one of 4 replicas for 1 h: 0.25 GPU-h allocated, x 0.8 = 0.2 active; L4 at 0.8 USD: 0.2 USD allocated
    res = usage.compute_usage(series, grid, {"shared_replicas": {"nvidia.com/gpu.shared": 4}})
    t = res["tenants"][0]
    assert t["allocated_gpu_hours"] == pytest.approx(0.25) and t["active_gpu_hours"] == pytest.approx(0.2)
    assert t["cost_allocated"] == pytest.approx(0.2)
    with pytest.raises(GpuOpsError, match="shared_replicas"):
        usage.compute_usage(series, grid, {})


def test_whole_gpu_held_by_a_small_job():
    grid = usage.Grid(T0, T0 + 3600, STEP)
    pod = {"namespace": "t", "pod": "small"}
    dev = {"Hostname": "n1", "UUID": "GPU-d", "gpu": "0", "modelName": A100}
    series = {"requests": [{"metric": dict(pod, resource="nvidia_com_gpu"), "values": _at(range(4), 1)}],
              "phase": [{"metric": dict(pod, phase="Running"), "values": _at(range(4), 1)}],
              "info": [{"metric": dict(pod, created_by_kind="Job", created_by_name="small"), "values": _at(range(4), 1)}],
              "compute": [{"metric": dict(dev, **pod), "values": _at(range(4), 0.1)}],
              "memory": [{"metric": dict(dev, **pod), "values": _at(range(4), 8192)}]}
    # a Job on a whole A100 80GB for 1 h at peak 0.1 activity and 8 of 80 GiB (0.1): it needs 0.1 of the GPU,
    # under oversize_pct 50 %: 1 GPU-h x (1 - 0.1) = 0.9 GPU-h wasted
    res = usage.compute_usage(series, grid, {})
    waste = dict((w["category"], w["gpu_hours"]) for w in res["waste"])
    assert waste["whole_gpu_small_job"] == pytest.approx(0.9) and waste["request_mismatch"] == 0.0


def test_missing_metric_is_named(fake):
    data = two_tenants()
    del data["kube_pod_status_phase"]
    fake.matrices = matrices(data)
    with pytest.raises(GpuOpsError, match="no series of kube_pod_status_phase .*kube-state-metrics"):
        usage_report.usage_report(Prometheus(fake.url), PARAMS)
    data = two_tenants()
    del data["DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    fake.matrices = matrices(data)
    with pytest.raises(GpuOpsError, match="no series of DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
        usage_report.usage_report(Prometheus(fake.url), PARAMS)


def test_a_window_without_data_says_so(fake, tmp_path):
    params = dict(PARAMS, start=T0 - 86400, end=T0 - 86400 + 3600, report=str(tmp_path))
    res = usage_report.run(params, client=Prometheus(fake.url))
    assert res["no_data"] is True and "no data in the window" in res["message"] and res["tenants"] == []
    with open(os.path.join(str(tmp_path), "usage-report.md")) as f:
        assert "no data in the window" in f.read()


def test_bad_options_name_what_is_valid(fake):
    client = Prometheus(fake.url)
    with pytest.raises(GpuOpsError, match="unknown GPU model 'a100'.*valid catalog keys"):
        usage_report.usage_report(client, dict(PARAMS, prices={"a100": 1}))
    with pytest.raises(GpuOpsError, match="is not a duration"):
        usage_report.usage_report(client, dict(PARAMS, idle_min_duration="an hour"))
    with pytest.raises(GpuOpsError, match="window is empty"):
        usage_report.usage_report(client, dict(PARAMS, end=T0))
    with pytest.raises(GpuOpsError, match="compute_metric"):
        usage_report.usage_report(client, dict(PARAMS, compute_metric="DCGM_FI_DEV_FB_FREE"))


def test_report_check_mode_diff_and_second_run(fake, tmp_path):
    client = Prometheus(fake.url)
    params = dict(PARAMS, report=str(tmp_path / "out"))
    check = usage_report.run(params, check_mode=True, diff=True, client=client)
    assert check["changed"] is True and check["diff"]["after"] and not os.path.exists(str(tmp_path / "out"))
    first = usage_report.run(params, client=client)
    assert first["changed"] is True
    names = sorted(os.listdir(str(tmp_path / "out")))
    assert names == ["usage-idle.svg", "usage-report.md", "usage-tenants.svg", "usage-waste.svg"]
    with open(str(tmp_path / "out" / "usage-report.md")) as f:
        text = f.read()
    assert "| team-b | 1 | 1.29 | 0.00 |" in text and "team-b/b-serve-5d8f7c9b4-x2x9z" in text
    assert usage_report.run(params, client=client)["changed"] is False


def test_tenant_label_from_namespace_labels(fake):
    data = two_tenants()
    data["kube_namespace_labels"] = [({"namespace": "team-a", "label_cost_center": "ml"}, _at(range(12), 1)),
                                     ({"namespace": "team-b", "label_cost_center": "ml"}, _at(range(12), 1))]
    fake.matrices = matrices(data)
    res = usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, tenant_label="cost-center"))
    assert 'label_cost_center' in res["queries"]["namespaces"]
    # both namespaces carry cost-center=ml: one tenant with both teams' 2 + 9/7 GPU-h
    assert [(r["name"], r["allocated_gpu_hours"]) for r in res["tenants"]] == [("ml", pytest.approx(2 + 9 / 7.0,
                                                                                                    abs=1e-4))]
    del data["kube_namespace_labels"]
    with pytest.raises(GpuOpsError, match="no series of kube_namespace_labels .*allowlist=namespaces=\\[cost-center\\]"):
        usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, tenant_label="cost-center"))


@pytest.mark.parametrize("key, name", [
    # kube-state-metrics v2.20 labelName: [^a-zA-Z0-9_] -> "_", then "([a-z0-9])([A-Z])" -> "$1_$2", lower case
    ("team", "label_team"),
    ("cost-center", "label_cost_center"),
    ("gpuops.io/costCenter", "label_gpuops_io_cost_center"),
    ("Team", "label_team"),
    ("example.com/GPUTeam2X", "label_example_com_gputeam2_x"),
])
def test_ksm_label_name(key, name):
    assert usage.ksm_label_name(key) == name


def test_tenant_label_camel_case_as_kube_state_metrics_exports_it(fake):
    # a namespace label gpuops.io/costCenter=ml reaches Prometheus as label_gpuops_io_cost_center="ml"
    # (kube-state-metrics snake-cases label keys), not label_gpuops_io_costCenter
    data = two_tenants()
    data["kube_namespace_labels"] = [({"namespace": "team-a", "label_gpuops_io_cost_center": "ml"}, _at(range(12), 1)),
                                     ({"namespace": "team-b", "label_gpuops_io_cost_center": "ml"}, _at(range(12), 1))]
    fake.matrices = matrices(data)
    res = usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, tenant_label="gpuops.io/costCenter"))
    assert res["queries"]["namespaces"] == "max by (namespace, label_gpuops_io_cost_center) (kube_namespace_labels)"
    assert [(r["name"], r["allocated_gpu_hours"]) for r in res["tenants"]] == [("ml", pytest.approx(2 + 9 / 7.0,
                                                                                                    abs=1e-4))]


def test_gpu_util_leaves_mig_time_unmeasured(fake):
    data = two_tenants()
    # DCGM_FI_DEV_GPU_UTIL in percent; dcgm-exporter reports 0 on MIG devices
    data["DCGM_FI_DEV_GPU_UTIL"] = [(labels, [(t, v * 100) for t, v in values])
                                    for labels, values in data.pop("DCGM_FI_PROF_GR_ENGINE_ACTIVE")]
    fake.matrices = matrices(data)
    res = usage_report.usage_report(Prometheus(fake.url), dict(PARAMS, compute_metric="DCGM_FI_DEV_GPU_UTIL"))
    a, b = _row(res["tenants"], "team-a"), _row(res["tenants"], "team-b")
    assert a["active_gpu_hours"] == pytest.approx(1.0)  # 50 % of 2 GPU-h, as with the engine-active ratio
    # team-b's 9/7 GPU-h on a MIG slice: unmeasured, not 0 % active, and so not an idle holder
    assert b["unmeasured_gpu_hours"] == pytest.approx(9 / 7.0, abs=1e-4) and b["active_pct"] is None
    assert res["idle_holders"] == []


def test_exported_labels_through_a_service_monitor(fake):
    """honorLabels false: the pod's labels arrive as exported_namespace/exported_pod and every series carries the
    exporter's own namespace/pod; a device with only the exporter's pod is free. Same figures as by hand above."""
    exporter = {"namespace": "gpu-monitoring", "pod": "dcgm-exporter-7xk2p"}
    data = two_tenants()
    for metric in ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"):
        rows = []
        for labels, values in data[metric]:
            labels = dict(labels)
            if "pod" in labels:
                labels["exported_namespace"], labels["exported_pod"] = labels.pop("namespace"), labels.pop("pod")
            rows.append((dict(labels, **exporter), values))
        data[metric] = rows
    fake.matrices = matrices(data)
    res = usage_report.usage_report(Prometheus(fake.url), PARAMS)
    assert [r["name"] for r in res["tenants"]] == ["team-a", "team-b"]
    a = _row(res["tenants"], "team-a")
    assert a["active_gpu_hours"] == pytest.approx(1.0) and a["pending_while_free_gpu_hours"] == pytest.approx(1.0)
    assert [r["pod"] for r in res["idle_holders"]] == ["b-serve-5d8f7c9b4-x2x9z"]
