"""Unit tests of the stack validation logic (device_plugin, tenancy quotas, HPAs, DCGM exporter checks)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import validate as gv
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import hpa
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import quotas
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import resources
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _ts(replicas=4, name="nvidia.com/gpu", **extra):
    rep = {"resources": [dict({"name": name, "replicas": replicas})]}
    rep.update(extra)
    return {"version": "v1", "sharing": {"timeSlicing": rep}}


# ---------------------------------------------------------------- resources

def test_mig_resources_come_from_the_catalog():
    res = resources.mig_resources()
    assert "nvidia.com/mig-1g.10gb" in res
    assert "nvidia.com/mig-3g.40gb" in res
    assert "nvidia.com/mig-1g.10gb.me" in res  # '+' becomes '.'
    assert "nvidia.com/mig-7g.141gb" in res  # H200
    assert not any("+" in r for r in res)


@pytest.mark.parametrize("name", ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-2g.20gb",
                                  "nvidia.com/mig-1g.5gb.shared", "nvidia.com/mig-1g.6gb.me"])
def test_known_gpu_resources(name):
    assert resources.check_gpu_resource(name) == name


def test_unknown_mig_resource_names_valid_ones():
    with pytest.raises(GpuOpsError) as e:
        resources.check_gpu_resource("nvidia.com/mig-1g.11gb")
    assert "unknown MIG resource 'nvidia.com/mig-1g.11gb'" in e.value.msg
    assert "nvidia.com/mig-1g.10gb" in e.value.msg
    assert "nvidia.com/mig-1g.10gb" in e.value.details["valid_resources"]


def test_mig_resource_with_plus_gets_a_hint():
    with pytest.raises(GpuOpsError) as e:
        resources.check_gpu_resource("nvidia.com/mig-1g.10gb+me")
    assert "nvidia.com/mig-1g.10gb.me" in e.value.msg


def test_unknown_vendor_resource():
    with pytest.raises(GpuOpsError) as e:
        resources.check_gpu_resource("nvidia.com/gpus")
    assert "did you mean nvidia.com/gpu" in e.value.msg


# ---------------------------------------------------------------- device plugin configs

def test_default_config_is_normalized():
    plan = device_plugin.validate_device_plugin({"default": {}}, "default")
    assert plan["configs"]["default"] == {"version": "v1", "flags": {"migStrategy": "none"}}
    assert plan["summary"]["default"] == {"mig_strategy": "none", "sharing": "none", "replicas": 1}
    assert not plan["uses_mps"] and not plan["uses_mig"]


@pytest.mark.parametrize("strategy", ["none", "single", "mixed"])
def test_mig_strategies(strategy):
    plan = device_plugin.validate_device_plugin({"default": {"flags": {"migStrategy": strategy}}}, "default")
    assert plan["summary"]["default"]["mig_strategy"] == strategy
    assert plan["uses_mig"] == (strategy != "none")


def test_unknown_mig_strategy_names_valid_values():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": {"flags": {"migStrategy": "mixd"}}}, "default")
    assert "'mixd' is not valid" in e.value.msg
    assert "did you mean mixed" in e.value.msg
    assert "none, single, mixed" in e.value.msg


def test_device_list_strategy_configmap_does_not_exist():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": {"flags": {"plugin": {"deviceListStrategy": "configmap"}}}}, "default")
    assert "envvar, volume-mounts, cdi-annotations, cdi-cri" in e.value.msg


def test_device_list_strategy_list_accepted():
    plan = device_plugin.validate_device_plugin(
        {"default": {"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-cri"]}}}}, "default")
    assert plan["configs"]["default"]["flags"]["plugin"]["deviceListStrategy"] == ["envvar", "cdi-cri"]


def test_unknown_flag_is_an_error_not_ignored():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": {"flags": {"config": "default"}}}, "default")
    assert "unknown key(s) config" in e.value.msg
    assert "migStrategy" in e.value.msg


@pytest.mark.parametrize("replicas", [0, 1, -3, "1"])
def test_replicas_below_two_refused(replicas):
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": _ts(replicas)}, "default")
    assert "replicas must be >= 2" in e.value.msg


def test_replicas_not_an_integer():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": _ts("four")}, "default")
    assert "must be an integer" in e.value.msg


def test_time_slicing_summary_and_flags():
    cfg = _ts(4, renameByDefault=True, failRequestsGreaterThanOne=True)
    plan = device_plugin.validate_device_plugin({"ts": cfg}, "ts")
    assert plan["summary"]["ts"] == {"mig_strategy": "none", "sharing": "time-slicing", "replicas": 4}
    ts = plan["configs"]["ts"]["sharing"]["timeSlicing"]
    assert ts["renameByDefault"] is True and ts["failRequestsGreaterThanOne"] is True


def test_time_slicing_needs_resources():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": {"sharing": {"timeSlicing": {"resources": []}}}}, "d")
    assert "no resources specified" in e.value.msg


def test_time_slicing_mig_resource_needs_mixed():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": _ts(2, "nvidia.com/mig-1g.10gb")}, "d")
    assert "only with migStrategy: mixed" in e.value.msg
    cfg = _ts(2, "nvidia.com/mig-1g.10gb")
    cfg["flags"] = {"migStrategy": "mixed"}
    assert device_plugin.validate_device_plugin({"d": cfg}, "d")["summary"]["d"]["sharing"] == "time-slicing"


def test_shared_suffix_is_not_a_physical_resource():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": _ts(2, "nvidia.com/gpu.shared")}, "d")
    assert "renameByDefault" in e.value.msg


def test_ignored_fields_are_dropped_with_a_warning():
    cfg = {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "devices": [0],
                                                      "rename": "x"}]}},
           "resources": {"gpus": [{"pattern": "*", "name": "gpu"}]}}
    plan = device_plugin.validate_device_plugin({"d": cfg}, "d")
    res = plan["configs"]["d"]["sharing"]["timeSlicing"]["resources"][0]
    assert res == {"name": "nvidia.com/gpu", "replicas": 2}
    assert "resources" not in plan["configs"]["d"]
    assert len(plan["warnings"]) == 3
    assert all("ignored" in w for w in plan["warnings"])


def test_time_slicing_and_mps_mutually_exclusive():
    cfg = {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                       "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": cfg}, "d")
    assert "mutually exclusive" in e.value.msg


def _mps(replicas=2, strategy="none", name="nvidia.com/gpu", **extra):
    rep = dict({"resources": [{"name": name, "replicas": replicas}]}, **extra)
    return {"flags": {"migStrategy": strategy}, "sharing": {"mps": rep}}


def test_mps_gets_mps_root_and_needs_gfd():
    plan = device_plugin.validate_device_plugin({"default": {}, "mps": _mps()}, "default", mps_root="/run/nvidia/mps")
    assert plan["uses_mps"]
    assert plan["configs"]["mps"]["flags"]["mpsRoot"] == "/run/nvidia/mps"
    assert "mpsRoot" not in plan["configs"]["default"]["flags"]
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"mps": _mps()}, "mps", gfd_enabled=False)
    assert "needs GPU Feature Discovery" in e.value.msg


@pytest.mark.parametrize("strategy,text", [("mixed", "not supported with MPS"), ("single", "MIG-enabled")])
def test_mps_refuses_mig(strategy, text):
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"m": _mps(strategy=strategy)}, "m")
    assert text in e.value.msg


def test_mps_refuses_mig_resources():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"m": _mps(name="nvidia.com/mig-1g.10gb")}, "m")
    assert "MPS supports only full GPUs" in e.value.msg
    # failRequestsGreaterThanOne: false is honoured by the pinned device plugin v0.20.0 (test_stack_conformance.py)
    plan = device_plugin.validate_device_plugin({"m": _mps(failRequestsGreaterThanOne=False)}, "m")
    assert plan["configs"]["m"]["sharing"]["mps"]["failRequestsGreaterThanOne"] is False


def test_version_must_be_v1():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": {"version": "v2"}}, "d")
    assert "the only valid version is v1" in e.value.msg


def test_default_config_must_exist():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"a": {}}, "default")
    assert "valid names: a" in e.value.msg


def test_node_label_must_name_an_existing_config():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"default": {}, "ts-4": _ts()}, "default", {"node-1": "ts4"})
    assert "node node-1" in e.value.msg and "valid names: default, ts-4" in e.value.msg


@pytest.mark.parametrize("name", ["has space", "a" * 64, "-lead", "slash/x", ""])
def test_config_name_must_be_a_label_value(name):
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({name: {}}, name)
    assert "valid label value" in e.value.msg


def test_imex_channel_ids():
    device_plugin.validate_device_plugin({"d": {"imex": {"channelIDs": [0]}}}, "d")
    with pytest.raises(GpuOpsError):
        device_plugin.validate_device_plugin({"d": {"imex": {"channelIDs": [1]}}}, "d")


# ---------------------------------------------------------------- quotas

def test_limits_key_converted_with_warning():
    hard, warns = quotas.normalize_quota_hard({"limits.nvidia.com/gpu": 2, "requests.cpu": "8", "limits.cpu": "16"})
    assert hard == {"requests.nvidia.com/gpu": "2", "requests.cpu": "8", "limits.cpu": "16"}
    assert len(warns) == 1 and "never enforced" in warns[0]


def test_bare_key_converted_with_warning():
    hard, warns = quotas.normalize_quota_hard({"nvidia.com/mig-1g.10gb": "3"})
    assert hard == {"requests.nvidia.com/mig-1g.10gb": "3"}
    assert "bare" in warns[0]


def test_conflicting_request_and_limit_refused():
    with pytest.raises(GpuOpsError) as e:
        quotas.normalize_quota_hard({"requests.nvidia.com/gpu": 2, "limits.nvidia.com/gpu": 4})
    assert "different values" in e.value.msg


def test_equal_request_and_limit_merge():
    hard, _warnings = quotas.normalize_quota_hard({"requests.nvidia.com/gpu": 2, "limits.nvidia.com/gpu": "2"})
    assert hard == {"requests.nvidia.com/gpu": "2"}


def test_quota_unknown_mig_resource():
    with pytest.raises(GpuOpsError) as e:
        quotas.normalize_quota_hard({"requests.nvidia.com/mig-9g.99gb": 1}, "tenant x quota")
    assert e.value.msg.startswith("tenant x quota: unknown MIG resource")


@pytest.mark.parametrize("value", ["1.5", "500m", "-1", "two"])
def test_quota_gpu_quantity_must_be_whole(value):
    with pytest.raises(GpuOpsError):
        quotas.normalize_quota_hard({"requests.nvidia.com/gpu": value})


def _tenant(name, **kw):
    return dict({"name": name}, **kw)


def test_tenants_normalized():
    tenants, warns = quotas.validate_tenants(
        [_tenant("team-a", quota={"hard": {"limits.nvidia.com/gpu": 4}},
                 priority_quotas={"gpu-low": {"hard": {"nvidia.com/gpu": 2}}},
                 groups={"edit": ["devs"]})],
        {"gpu-low": {}})
    t = tenants[0]
    assert t["quota"]["hard"] == {"requests.nvidia.com/gpu": "4"}
    assert t["priority_quotas"]["gpu-low"]["hard"] == {"requests.nvidia.com/gpu": "2"}
    assert t["groups"] == {"admin": [], "edit": ["devs"], "view": []}
    assert t["pod_security"] == "baseline"
    assert len(warns) == 2


def test_tenant_unknown_priority_class():
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_tenants([_tenant("a", priority_quotas={"gpu-lo": {"hard": {"pods": 1}}})], {"gpu-low": {}})
    assert "gpu-lo" in e.value.msg and "gpu-low" in e.value.msg


def test_tenant_pod_security_level():
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_tenants([_tenant("a", pod_security="strict")])
    assert "privileged, baseline, restricted" in e.value.msg


def test_tenant_duplicate_and_bad_name():
    with pytest.raises(GpuOpsError):
        quotas.validate_tenants([_tenant("a"), _tenant("a")])
    with pytest.raises(GpuOpsError):
        quotas.validate_tenants([_tenant("Team_A")])


def test_limit_range_gpu_only_in_gpu_only_namespace():
    lr = [{"type": "Container", "max": {"nvidia.com/gpu": 2}}]
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_tenants([_tenant("a", limit_range=lr)])
    assert "unsafe" in e.value.msg
    quotas.validate_tenants([_tenant("a", limit_range=lr, gpu_only=True)])
    quotas.validate_tenants([_tenant("a", limit_range=[{"type": "Container", "default": {"cpu": "1"}}])])


def test_limit_range_gpu_default_must_equal_default_request():
    lr = [{"type": "Container", "default": {"nvidia.com/gpu": 2}, "defaultRequest": {"nvidia.com/gpu": 1}}]
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_tenants([_tenant("a", limit_range=lr, gpu_only=True)])
    assert "must equal defaultRequest" in e.value.msg


# ---------------------------------------------------------------- capacity

def _node(name, alloc, unschedulable=False):
    return {"metadata": {"name": name}, "spec": {"unschedulable": unschedulable}, "status": {"allocatable": alloc}}


NODES = [_node("a", {"nvidia.com/gpu": "8", "cpu": "64"}),
         _node("b", {"nvidia.com/mig-1g.10gb": "14", "nvidia.com/gpu": "0"}),
         _node("c", {"nvidia.com/gpu": "8"}, unschedulable=True)]


def _tenants(*specs):
    return quotas.validate_tenants([_tenant("t%d" % i, quota={"hard": h}) for i, h in enumerate(specs)])[0]


def test_capacity_within_limits():
    second = {"requests.nvidia.com/gpu": 4, "requests.nvidia.com/mig-1g.10gb": 14}
    res = quotas.capacity_check(_tenants({"requests.nvidia.com/gpu": 4}, second), NODES)
    assert res["overcommitted"] == []
    assert res["resources"]["nvidia.com/gpu"] == {"quota": 8, "allocatable": 8, "overcommitted": False,
                                                  "tenants": {"t0": 4, "t1": 4}}


def test_capacity_overcommit_fails_by_default():
    with pytest.raises(GpuOpsError) as e:
        quotas.capacity_check(_tenants({"requests.nvidia.com/gpu": 6}, {"requests.nvidia.com/gpu": 6}), NODES)
    assert "nvidia.com/gpu: tenant quotas 12 > allocatable 8 (t0=6, t1=6)" in e.value.msg
    assert e.value.details["allocatable"] == {"nvidia.com/gpu": 8, "nvidia.com/mig-1g.10gb": 14}


def test_capacity_missing_resource_is_overcommit():
    with pytest.raises(GpuOpsError) as e:
        quotas.capacity_check(_tenants({"requests.nvidia.com/mig-3g.40gb": 1}), NODES)
    assert "nvidia.com/mig-3g.40gb: tenant quotas 1 > allocatable 0" in e.value.msg


def test_capacity_warn_and_ignore():
    tenants = _tenants({"requests.nvidia.com/gpu": 9})
    res = quotas.capacity_check(tenants, NODES, "warn")
    assert res["overcommitted"] == ["nvidia.com/gpu"] and "overcommit" in res["warnings"][0]
    res = quotas.capacity_check(tenants, NODES, "ignore")
    assert res["overcommitted"] == ["nvidia.com/gpu"] and res["warnings"] == []


def test_capacity_scoped_quotas_count_when_no_unscoped():
    tenants = quotas.validate_tenants([_tenant("a", priority_quotas={"gpu-low": {"hard": {"requests.nvidia.com/gpu": 3}},
                                                                     "gpu-high": {"hard": {"requests.nvidia.com/gpu": 2}}})],
                                      {"gpu-low": {}, "gpu-high": {}})[0]
    res = quotas.capacity_check(tenants, NODES, "fail")
    assert res["resources"]["nvidia.com/gpu"]["quota"] == 5
    assert "not capped" in res["warnings"][0]


# ---------------------------------------------------------------- priority classes

def test_priority_classes_valid():
    out = quotas.validate_priority_classes({"gpu-low": {"value": 10, "preemption_policy": "Never"}})
    assert out["gpu-low"] == {"value": 10, "preemption_policy": "Never", "description": "", "global_default": False}


@pytest.mark.parametrize("spec,text", [
    ({"value": 1000000001}, "<= 1000000000"),
    ({"value": -2147483649}, ">= -2147483648"),
    ({}, "'value' is required"),
    ({"value": 1, "preemption_policy": "Always"}, "PreemptLowerPriority, Never"),
])
def test_priority_class_bad(spec, text):
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_priority_classes({"gpu-x": spec})
    assert text in e.value.msg


def test_priority_class_system_prefix_and_one_default():
    with pytest.raises(GpuOpsError):
        quotas.validate_priority_classes({"system-gpu": {"value": 1}})
    with pytest.raises(GpuOpsError) as e:
        quotas.validate_priority_classes({"a": {"value": 1, "global_default": True}, "b": {"value": 2, "global_default": True}})
    assert "only one" in e.value.msg


def _pc(name, value, policy=None):
    obj = {"metadata": {"name": name}, "value": value}
    if policy:
        obj["preemptionPolicy"] = policy
    return obj


def test_priority_plan_create_update():
    desired = quotas.validate_priority_classes({"a": {"value": 1}, "b": {"value": 2}})
    plan = quotas.plan_priority_classes(desired, [_pc("a", 1, "PreemptLowerPriority")])
    assert plan["create"] == ["b"] and plan["update"] == ["a"] and plan["replace"] == []


def test_priority_plan_immutable_change_fails_clearly():
    desired = quotas.validate_priority_classes({"a": {"value": 5, "preemption_policy": "Never"}})
    with pytest.raises(GpuOpsError) as e:
        quotas.plan_priority_classes(desired, [_pc("a", 1)])
    assert "immutable" in e.value.msg and "value 1 -> 5" in e.value.msg
    assert "preemptionPolicy PreemptLowerPriority -> Never" in e.value.msg
    assert "Nothing was changed" in e.value.msg


def test_priority_plan_replace_policy():
    desired = quotas.validate_priority_classes({"a": {"value": 5}})
    plan = quotas.plan_priority_classes(desired, [_pc("a", 1)], "replace")
    assert plan["replace"] == ["a"]
    assert plan["changes"]["a"]["value"] == {"before": 1, "after": 5}


# ---------------------------------------------------------------- HPA

def _hpa(**kw):
    base = {"name": "llm", "namespace": "t", "target": {"name": "llm"}, "min_replicas": 1, "max_replicas": 4,
            "gpu_metric": {"name": "gpu_engine_active", "average_value": "700m"}}
    base.update(kw)
    return base


def test_hpa_spec():
    spec = hpa.validate_hpa(_hpa(latency_metric={"name": "p95", "average_value": "250m"},
                                 behavior={"scaleDown": {"stabilizationWindowSeconds": 600,
                                                         "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}}))
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"}
    assert [m["pods"]["metric"]["name"] for m in spec["metrics"]] == ["gpu_engine_active", "p95"]
    assert spec["metrics"][0]["pods"]["target"] == {"type": "AverageValue", "averageValue": "700m"}
    assert spec["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] == 60


def test_hpa_min_greater_than_max():
    with pytest.raises(GpuOpsError) as e:
        hpa.validate_hpa(_hpa(min_replicas=5, max_replicas=2))
    assert "min_replicas (5) must be <= max_replicas (2)" in e.value.msg


@pytest.mark.parametrize("behavior,text", [
    ({"scaleUp": {"stabilizationWindowSeconds": 3601}}, "<= 3600"),
    ({"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}}, "<= 1800"),
    ({"scaleDown": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 0}]}}, ">= 1"),
    ({"scaleDown": {"policies": [{"type": "Replicas", "value": 1, "periodSeconds": 10}]}}, "Pods, Percent"),
    ({"scaleDown": {"selectPolicy": "Maximum"}}, "Max, Min, Disabled"),
    ({"scaleDown": {"policies": [{"type": "Pods", "value": 0, "periodSeconds": 10}]}}, ">= 1"),
    ({"scaleSideways": {}}, "unknown key"),
])
def test_hpa_behavior_limits(behavior, text):
    with pytest.raises(GpuOpsError) as e:
        hpa.validate_hpa(_hpa(behavior=behavior))
    assert text in e.value.msg


def test_hpa_ratio_metric_target_over_one_never_triggers():
    with pytest.raises(GpuOpsError) as e:
        hpa.validate_hpa(_hpa(gpu_metric={"name": "gpu_engine_active", "average_value": "70"}))
    assert "never triggers" in e.value.msg and "700m" in e.value.msg
    hpa.validate_hpa(_hpa(gpu_metric={"name": "gpu_utilization_percent", "average_value": "70"}))


def test_hpa_unknown_gpu_metric():
    with pytest.raises(GpuOpsError) as e:
        hpa.validate_hpa(_hpa(gpu_metric={"name": "gpu_utilization", "average_value": "70"}))
    assert "gpu_utilization_percent" in e.value.msg


def test_hpa_needs_a_metric_and_pods_metrics_need_average_value():
    with pytest.raises(GpuOpsError):
        hpa.validate_hpa(_hpa(gpu_metric=None))
    with pytest.raises(GpuOpsError) as e:
        metric = {"type": "Pods", "pods": {"metric": {"name": "x"}, "target": {"type": "Value", "value": "1"}}}
        hpa.validate_hpa(_hpa(metrics=[metric]))
    assert "AverageValue" in e.value.msg


def test_hpa_duplicates():
    with pytest.raises(GpuOpsError):
        hpa.validate_hpas([_hpa(), _hpa()])


# ---------------------------------------------------------------- DCGM metrics

def test_dcgm_metrics_csv():
    csv = dcgm.validate_dcgm_metrics([{"field": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "type": "gauge", "help": "a, b"}])
    assert csv == "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, a; b\n"


@pytest.mark.parametrize("metric", [{"field": "GPU_UTIL"}, {"field": "DCGM_FI_DEV_GPU_UTIL", "type": "histogram"}])
def test_dcgm_metrics_bad(metric):
    with pytest.raises(GpuOpsError):
        dcgm.validate_dcgm_metrics([metric])


def test_run_validate_warns_without_mig_profiling_metric():
    result, warns = gv.run_validate({"component": "dcgm_exporter",
                                     "metrics": [{"field": "DCGM_FI_DEV_GPU_UTIL", "type": "gauge"}]})
    assert result["metrics_csv"].startswith("DCGM_FI_DEV_GPU_UTIL")
    assert "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in warns[0]


def test_run_validate_tenancy_capacity():
    result, warns = gv.run_validate({"component": "tenancy", "tenants": [_tenant("a", quota={"hard": {
        "requests.nvidia.com/gpu": 20}})], "priority_classes": {"gpu-low": {"value": 1}}, "nodes": NODES,
        "capacity_policy": "warn"})
    assert result["capacity"]["overcommitted"] == ["nvidia.com/gpu"]
    assert result["priority_class_plan"]["create"] == ["gpu-low"]
    assert any("overcommit" in w for w in warns)
