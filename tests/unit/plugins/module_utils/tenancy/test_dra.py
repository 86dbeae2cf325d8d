"""Unit tests of the DRA objects (plugins/module_utils/tenancy/dra.py)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import validate as gv
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import quotas
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _inst(gi, profile, mib, ci=0, uuid=None, has_ci=True):
    return {"gpu_instance_id": gi, "compute_instance_id": ci if has_ci else None, "profile": profile,
            "memory_mib": mib, "uuid": uuid or "MIG-%d-%d" % (gi, ci), "has_compute_instance": has_ci}


HOST = {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
    {"index": 0, "uuid": "GPU-aaa", "name": "NVIDIA A100-SXM4-80GB", "model": "a100_80gb", "memory_total_mib": 81920,
     "mig_mode_current": True, "instances": [_inst(7, "1g.10gb", 9728), _inst(8, "1g.10gb", 9728, uuid="MIG-x"),
                                             _inst(1, "1c.3g.40gb", 40192), _inst(2, "2g.20gb", 19968, has_ci=False)]},
    {"index": 1, "uuid": "GPU-bbb", "name": "NVIDIA A100-SXM4-80GB", "model": "a100_80gb", "memory_total_mib": 81920,
     "mig_mode_current": False, "instances": []},
    {"index": 2, "lost": True, "uuid": None, "name": None, "model": None},
]}


def test_resource_slice_from_gpu_info_facts():
    rs = gpu_dra.resource_slice("dgx-a100-01", HOST)
    assert rs["apiVersion"] == "resource.k8s.io/v1" and rs["kind"] == "ResourceSlice"
    spec = rs["spec"]
    assert spec["driver"] == "gpu.nvidia.com" and spec["nodeName"] == "dgx-a100-01"
    assert spec["pool"] == {"name": "dgx-a100-01", "generation": 1, "resourceSliceCount": 1}
    names = [d["name"] for d in spec["devices"]]
    # split compute instances and GPU instances without a compute instance are no devices; lost GPUs neither
    assert names == ["gpu-0-mig-7-0", "gpu-0-mig-8-0", "gpu-1"]
    mig = spec["devices"][1]
    assert mig["attributes"]["type"] == {"string": "mig"}
    assert mig["attributes"]["profile"] == {"string": "1g.10gb"}
    assert mig["attributes"]["uuid"] == {"string": "MIG-x"}
    assert mig["attributes"]["parentUUID"] == {"string": "GPU-aaa"}
    assert mig["attributes"]["driverVersion"] == {"version": "580.95.5"}
    assert mig["attributes"]["cudaDriverVersion"] == {"version": "13.0.0"}
    assert mig["capacity"] == {"memory": {"value": "9728Mi"}}
    gpu = spec["devices"][2]
    assert gpu["attributes"]["type"] == {"string": "gpu"} and gpu["attributes"]["index"] == {"int": 1}
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-80GB"}
    assert gpu["attributes"]["architecture"] == {"string": "Ampere"}


def test_resource_slice_bad_input():
    with pytest.raises(GpuOpsError, match="result of gpuops.k8s.gpu_info"):
        gpu_dra.resource_slice("n1", {"nope": 1})
    with pytest.raises(GpuOpsError, match="not a valid Kubernetes node name"):
        gpu_dra.resource_slice("Bad Node", HOST)


def test_device_classes():
    classes = dict((c["metadata"]["name"], c) for c in gpu_dra.device_classes(["1g.10gb", "3g.40gb", "1g.10gb+me"]))
    assert sorted(classes) == ["gpu.nvidia.com", "mig-1g.10gb.me.nvidia.com", "mig-1g.10gb.nvidia.com",
                               "mig-3g.40gb.nvidia.com", "mig.nvidia.com"]
    expr = classes["mig-1g.10gb.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"]
    assert expr == ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && "
                    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'")
    assert "type == 'gpu'" in classes["gpu.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"]
    every = gpu_dra.device_classes()
    assert "mig-7g.141gb.nvidia.com" in [c["metadata"]["name"] for c in every]
    assert not any(".1c." in c["metadata"]["name"] or "mig-1c" in c["metadata"]["name"] for c in every)
    with pytest.raises(GpuOpsError, match="not a MIG profile string"):
        gpu_dra.device_classes(["1g.10"])


def test_claim_quotas_from_the_tenant_spec():
    tenants, _w = quotas.validate_tenants([{"name": "a", "quota": {"hard": {
        "requests.nvidia.com/gpu": 2, "requests.nvidia.com/mig-1g.10gb": 4, "requests.cpu": "8",
        "requests.nvidia.com/gpu.shared": 3}}}])
    assert gpu_dra.tenant_claim_quotas(tenants) == {"a": {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "2",
        "mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}}
    with pytest.raises(GpuOpsError, match="time-slicing/MPS replica"):
        gpu_dra.class_for_resource("nvidia.com/gpu.shared")


def test_run_validate_dra_component():
    result, _w = gv.run_validate({"component": "dra", "tenants": [
        {"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 1}}}], "dra": {"profiles": ["1g.10gb"]}})
    assert result["dra"]["quotas"] == {"a": {"mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}}
    assert len(result["dra"]["device_classes"]) == 3
    with pytest.raises(GpuOpsError, match="not among the classes made"):
        gv.run_validate({"component": "dra", "tenants": [
            {"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-2g.20gb": 1}}}], "dra": {"profiles": ["1g.10gb"]}})


def test_tenancy_component_adds_claim_quotas_or_drops_gpu_keys():
    tenants = [{"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 2, "requests.cpu": "4"}},
                "priority_quotas": {"gpu-low": {"hard": {"requests.nvidia.com/gpu": 1}}}}]
    classes = {"gpu-low": {"value": 1000, "preemption_policy": "Never"}}
    result, _w = gv.run_validate({"component": "tenancy", "tenants": tenants, "priority_classes": classes,
                                  "dra": {"quotas": True}})
    hard = result["tenants"][0]["quota"]["hard"]
    assert hard["mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices"] == "2"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "2"
    # scoped quotas match pods only: no claim keys there
    assert result["tenants"][0]["priority_quotas"]["gpu-low"]["hard"] == {"requests.nvidia.com/gpu": "1"}
    result, _w = gv.run_validate({"component": "tenancy", "tenants": tenants, "priority_classes": classes,
                                  "gpu_quotas": False})
    assert result["tenants"][0]["quota"]["hard"] == {"requests.cpu": "4"}
    assert result["tenants"][0]["priority_quotas"] == {}


def test_extended_resource_names_on_the_per_profile_classes():
    made = gpu_dra.device_classes(["1g.10gb", "1g.10gb+me"], extended_resources=True)
    classes = dict((c["metadata"]["name"], c) for c in made)
    # what the device plugin advertised, so pod specs asking for it keep working (DRAExtendedResource)
    assert classes["mig-1g.10gb.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb"
    assert classes["mig-1g.10gb.me.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb.me"
    assert "extendedResourceName" not in classes["gpu.nvidia.com"]["spec"]
    assert "extendedResourceName" not in classes["mig.nvidia.com"]["spec"]
    # the static mode keeps its classes as they were
    assert all("extendedResourceName" not in c["spec"] for c in gpu_dra.device_classes(["1g.10gb"]))
    result, _w = gv.run_validate({"component": "dra", "tenants": [
        {"name": "a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 1}}}],
        "dra": {"profiles": ["1g.10gb"], "extended_resources": True}})
    assert result["dra"]["quotas"] == {"a": {"mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices": "1"}}
    assert result["dra"]["device_classes"][2]["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb"
    with pytest.raises(GpuOpsError, match="extended_resources"):
        gv.run_validate({"component": "dra", "dra": {"extended_resource": True}})
