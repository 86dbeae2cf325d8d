"""Unit tests of the GPU metric path logic (plugins/module_utils/metrics)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import hpa
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm, keda

CAP = {"nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2", "cpu": "64"}


def test_node_devices_spread_mig_instances_over_gpus():
    devs = dcgm.node_devices("n1", CAP, 2)
    assert len(devs) == 16
    one = [d for d in devs if d["profile"] == "1g.10gb"]
    assert [d["gpu"] for d in one] == [0] * 7 + [1] * 7
    assert [d["instance"] for d in one if d["gpu"] == 0] == list(range(1, 8))
    assert all(d["uuid"] == dcgm.gpu_uuid("n1", d["gpu"]) for d in devs)
    assert one[0]["memory_mib"] == 10240


def test_render_is_dcgm_exporter_exposition():
    devs = dcgm.node_devices("n1", CAP, 2)
    alloc = {"nvidia.com/mig-1g.10gb/0": {"namespace": "t", "pod": "a", "container": "srv"}}
    text = dcgm.render("n1", devs, alloc, lambda owner: 95 if owner else 0, model="NVIDIA A100-SXM4-80GB")
    parsed = dcgm.parse(text)
    assert parsed["types"] == {dcgm.GPU_UTIL: "gauge", dcgm.ENGINE_ACTIVE: "gauge", dcgm.FB_USED: "gauge",
                               dcgm.FB_FREE: "gauge"}
    busy = [(n, lab, v) for n, lab, v in parsed["samples"] if lab.get("pod") == "a"]
    assert {n: v for n, lab, v in busy} == {dcgm.GPU_UTIL: 0, dcgm.ENGINE_ACTIVE: 0.95,
                                            dcgm.FB_USED: int(10240 * (0.1 + 0.8 * 0.95)),
                                            dcgm.FB_FREE: 10240 - int(10240 * (0.1 + 0.8 * 0.95))}
    labels = busy[0][1]
    assert labels == {"gpu": "0", "UUID": dcgm.gpu_uuid("n1", 0), "pci_bus_id": "00000000:10:00.0",
                      "device": "nvidia0", "modelName": "NVIDIA A100-SXM4-80GB", "GPU_I_PROFILE": "1g.10gb",
                      "GPU_I_ID": "1", "Hostname": "n1", "container": "srv", "namespace": "t", "pod": "a"}
    idle = [lab for n, lab, v in parsed["samples"] if n == dcgm.ENGINE_ACTIVE and "pod" not in lab]
    assert len(idle) == 15
    assert text.index("# HELP DCGM_FI_DEV_GPU_UTIL") < text.index("# TYPE DCGM_FI_DEV_GPU_UTIL gauge")


def test_render_memory_callback_sets_fb_used_capped_at_the_device():
    devs = dcgm.node_devices("n1", CAP, 2)
    alloc = dict(("nvidia.com/mig-1g.10gb/%d" % i, {"namespace": "t", "pod": "a", "container": "srv"}) for i in (0, 1))
    sizes = iter([9216, 99999])
    text = dcgm.render("n1", devs, alloc, lambda owner: 50 if owner else 0, memory=lambda owner: next(sizes))
    used = [v for n, lab, v in dcgm.parse(text)["samples"] if n == dcgm.FB_USED and lab.get("pod") == "a"]
    assert used == [9216, 10240]


def test_render_full_gpu_reports_gpu_util_and_rejects_bad_values():
    devs = dcgm.node_devices("n2", {"nvidia.com/gpu": "2"}, 2)
    alloc = {"nvidia.com/gpu/0": {"namespace": "t", "pod": "a", "container": ""}}
    samples = dcgm.parse(dcgm.render("n2", devs, alloc, lambda o: 40 if o else 0))["samples"]
    assert (dcgm.GPU_UTIL, 40.0) in [(n, v) for n, lab, v in samples if lab.get("pod") == "a"]
    with pytest.raises(GpuOpsError, match="outside 0-100"):
        dcgm.render("n2", devs, alloc, lambda o: 120)
    with pytest.raises(GpuOpsError, match="unknown fields"):
        dcgm.render("n2", devs, alloc, lambda o: 1, fields=["DCGM_FI_NOPE"])


def test_histogram_exposition():
    text = dcgm.histogram("request_latency_seconds", [({"namespace": "t", "pod": "a"}, {"0.1": 3}, 1.5, 10)],
                          ["0.1", "0.5"])
    assert 'request_latency_seconds_bucket{namespace="t",pod="a",le="0.1"} 3' in text
    assert 'request_latency_seconds_bucket{namespace="t",pod="a",le="+Inf"} 10' in text
    assert dcgm.parse(text)["types"] == {"request_latency_seconds": "histogram"}


def _hpas():
    return hpa.validate_hpas([{
        "name": "llm", "namespace": "team-a", "target": {"name": "llm"}, "min_replicas": 1, "max_replicas": 6,
        "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"},
        "latency_metric": {"name": "request_latency_p95_seconds", "average_value": "250m"},
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}]}}}])


def test_scaled_objects_use_the_adapter_queries():
    pod_metrics = dict((k, v["series"]) for k, v in hpa.GPU_POD_METRICS.items())
    lat = [{"series": "request_latency_seconds", "name": "request_latency_p95_seconds", "quantile": 0.95, "window": "2m"}]
    so = keda.scaled_objects(_hpas(), pod_metrics, "http://prometheus.monitoring:9090", lat)[0]
    assert so["kind"] == "ScaledObject" and so["apiVersion"] == "keda.sh/v1alpha1"
    assert so["spec"]["minReplicaCount"] == 1 and so["spec"]["maxReplicaCount"] == 6
    gpu, latency = so["spec"]["triggers"]
    assert gpu["metricType"] == "AverageValue" and gpu["metadata"]["threshold"] == "0.7"
    assert gpu["metadata"]["query"] == ('sum(avg(DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace="team-a",'
                                        'exported_pod=~"llm-[a-z0-9]+-[a-z0-9]+"}) by (exported_pod))')
    assert latency["metricType"] == "Value" and latency["metadata"]["threshold"] == "0.25"
    assert latency["metadata"]["query"].startswith("histogram_quantile(0.95, sum(rate(request_latency_seconds_bucket{")
    assert so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"][0]["value"] == 2
    with pytest.raises(GpuOpsError, match="not an http"):
        keda.scaled_objects(_hpas(), pod_metrics, "prometheus:9090")
    with pytest.raises(GpuOpsError, match="valid: gpu_engine_active"):
        keda.scaled_objects(_hpas(), pod_metrics, "http://p:9090")
