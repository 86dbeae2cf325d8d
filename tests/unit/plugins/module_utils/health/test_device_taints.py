"""Health per device on dra-dynamic nodes: DeviceTaintRules instead of a cordon (docs/dra.md, "Health per device").

The expected device names are written out by hand from docs/dra.md's naming scheme for an H100 80GB
(``gpu-<minor>``, ``gpu-<minor>-mig-<profile>-<GI profile id>-<placement start>``), not taken from the code.
"""
import copy

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks as health_checks
from ansible_collections.gpuops.k8s.plugins.module_utils.health import device_taints
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic

NODE = "h100-node-1"
OTHER = "h100-node-2"

# H100 80GB, GPU 3: the whole GPU, 1g.10gb (GI profile 19) at 0..6, 1g.10gb+me (20) at 0..6, 1g.20gb (15) at
# 0/2/4/6, 2g.20gb (14) at 0/2/4, 3g.40gb (9) at 0/4, 4g.40gb (5) at 0, 7g.80gb (0) at 0: 26 devices.
GPU3_DEVICES = (["gpu-3"]
                + ["gpu-3-mig-1g10gb-19-%d" % i for i in range(7)]
                + ["gpu-3-mig-1g10gb-me-20-%d" % i for i in range(7)]
                + ["gpu-3-mig-1g20gb-15-%d" % i for i in (0, 2, 4, 6)]
                + ["gpu-3-mig-2g20gb-14-%d" % i for i in (0, 2, 4)]
                + ["gpu-3-mig-3g40gb-9-0", "gpu-3-mig-3g40gb-9-4", "gpu-3-mig-4g40gb-5-0", "gpu-3-mig-7g80gb-0-0"])


def facts(n=4):
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
        {"index": i, "model": "h100_80gb", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%d" % i,
         "pci_bus_id": "00000000:%02X:00.0" % (0x07 + 0x10 * i), "memory_total_mib": 81559,
         "mig_mode_current": True, "temperature_c": 40,
         "ecc_errors": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0}} for i in range(n)]}


SLICES = gpu_dra_dynamic.resource_slices(NODE, facts()) + gpu_dra_dynamic.resource_slices(OTHER, facts())


def node(name, quarantined=False, streak=0, unschedulable=False, taints=None):
    ann = {}
    if quarantined:
        ann = {health_checks.ANN_CORDONED_BY: health_checks.CORDONED_BY_VALUE, health_checks.ANN_STREAK: str(streak),
               health_checks.ANN_REASON: "GPU 3: uncorrected ECC errors 25 > 10"}
    spec = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": {}, "annotations": ann}, "spec": spec}


def nodes(*first):
    names = [n["metadata"]["name"] for n in first]
    return list(first) + [node("spare-%d" % i) for i in range(4) if "spare-%d" % i not in names]


def verdict(**gpu_overrides):
    f = facts()
    for key, kw in gpu_overrides.items():
        f["gpus"][int(key[1:])].update(kw)
    return f


POLICY = {"dry_run": False, "uncordon_after": 2, "max_unhealthy_fraction": 0.5}


def plan(verdicts, node_list, existing=(), policy=None, dra=(NODE, OTHER)):
    return device_taints.plan_with_device_taints(verdicts, node_list, dict(POLICY, **(policy or {})),
                                                 now="2026-12-07T23:00:00Z", dra_dynamic_nodes=list(dra),
                                                 resource_slices=SLICES, device_taint_rules=list(existing))


def action_of(result, name):
    (a,) = [a for a in result["actions"] if a["node"] == name]
    return a


def ecc_on_gpu3():
    return health_checks.evaluate_host(verdict(g3={"ecc_errors": {"volatile_uncorrected": 25,
                                                                  "aggregate_uncorrected": 25}}))


def test_uncorrectable_ecc_on_gpu3_taints_every_device_of_gpu3_noexecute_and_leaves_the_node_schedulable():
    out = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER)))
    rules = out["device_taint_rules"]["apply"]
    assert sorted(r["spec"]["deviceSelector"]["device"] for r in rules) == sorted(GPU3_DEVICES)
    assert len(rules) == 26
    for r in rules:
        assert r["apiVersion"] == "resource.k8s.io/v1" and r["kind"] == "DeviceTaintRule"
        assert r["spec"]["deviceSelector"]["driver"] == "gpu.nvidia.com"
        assert r["spec"]["deviceSelector"]["pool"] == NODE
        assert r["spec"]["taint"] == {"key": "gpuops.k8s/gpu-health", "value": "fatal", "effect": "NoExecute"}
        assert r["metadata"]["labels"]["gpuops.k8s/health-node"] == NODE
        assert r["metadata"]["labels"]["gpuops.k8s/health-gpu"] == "3"
        assert r["metadata"]["name"] == "gpuops-health-%s-%s" % (NODE, r["spec"]["deviceSelector"]["device"])
    a = action_of(out, NODE)
    assert a["action"] == "cordon" and a["scope"] == "devices" and a["device_taint_rules"] == {3: "NoExecute"}
    # the node keeps serving its other GPUs: no unschedulable, no node taint; the audit trail is there
    assert "spec" not in a["patch"]
    assert a["patch"]["metadata"]["annotations"][health_checks.ANN_CORDONED_BY] == health_checks.CORDONED_BY_VALUE
    assert a["applied"] is True
    assert out["device_taint_rules"]["delete"] == []
    # the key is not the steering rules' key
    assert device_taints.HEALTH_TAINT_KEY != gpu_dra_dynamic.STEERING_TAINT_KEY


def test_xid_79_from_the_kernel_log_is_noexecute_on_that_gpu_only():
    log = "NVRM: Xid (PCI:0000:37:00): 79, pid=1234, GPU has fallen off the bus.\n"  # 0x07 + 0x10 * 3 = 0x37
    v = health_checks.evaluate_host(facts(), kernel_log=log)
    out = plan({NODE: v}, nodes(node(NODE), node(OTHER)))
    rules = out["device_taint_rules"]["apply"]
    assert set(r["spec"]["deviceSelector"]["device"] for r in rules) == set(GPU3_DEVICES)
    assert set(r["spec"]["taint"]["effect"] for r in rules) == {"NoExecute"}


def test_temperature_is_a_warning_noschedule():
    v = health_checks.evaluate_host(verdict(g1={"temperature_c": 95}))
    out = plan({NODE: v}, nodes(node(NODE), node(OTHER)))
    rules = out["device_taint_rules"]["apply"]
    assert set(r["spec"]["deviceSelector"]["device"] for r in rules) == set(d.replace("gpu-3", "gpu-1")
                                                                            for d in GPU3_DEVICES)
    assert set((r["spec"]["taint"]["effect"], r["spec"]["taint"]["value"]) for r in rules) == {("NoSchedule", "warning")}


def test_a_warning_and_a_fatal_error_on_two_gpus():
    effects, node_level = device_taints.gpu_effects([
        {"check": "temperature", "gpu": 0, "action": "drain"},
        {"check": "xid", "gpu": 2, "action": "drain", "value": 999},
        {"check": "xid", "gpu": 2, "action": "reboot", "value": 79},
        {"check": "ecc_uncorrected", "gpu": 1, "action": "reset_gpu"},
        {"check": "gpus_missing", "gpu": None, "action": "reboot"}])
    assert effects == {0: "NoSchedule", 1: "NoExecute", 2: "NoExecute"}
    assert [p["check"] for p in node_level] == ["gpus_missing"]


def test_second_run_applies_nothing_and_recovery_waits_for_the_hysteresis_then_deletes_the_rules():
    first = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER)))
    existing = copy.deepcopy(first["device_taint_rules"]["apply"])
    other_rule = copy.deepcopy(existing[0])
    other_rule["metadata"]["name"] = "gpuops-health-%s-gpu-0" % OTHER
    other_rule["metadata"]["labels"]["gpuops.k8s/health-node"] = OTHER
    existing.append(other_rule)
    # still failing: keep, nothing to write
    again = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE, quarantined=True), node(OTHER)), existing)
    assert action_of(again, NODE)["action"] == "keep"
    assert again["device_taint_rules"] == {"apply": [], "delete": []}
    # healthy once (uncordon_after 2): wait, the rules stay
    healthy = health_checks.evaluate_host(facts())
    wait = plan({NODE: healthy}, nodes(node(NODE, quarantined=True, streak=0), node(OTHER)), existing)
    assert action_of(wait, NODE)["action"] == "wait"
    assert wait["device_taint_rules"] == {"apply": [], "delete": []}
    # healthy twice: uncordon deletes exactly this node's 26 rules, not the other node's
    up = plan({NODE: healthy}, nodes(node(NODE, quarantined=True, streak=1), node(OTHER)), existing)
    a = action_of(up, NODE)
    assert a["action"] == "uncordon"
    deleted = up["device_taint_rules"]["delete"]
    assert sorted(r["metadata"]["name"] for r in deleted) == sorted("gpuops-health-%s-%s" % (NODE, d) for d in GPU3_DEVICES)
    assert set((r["apiVersion"], r["kind"]) for r in deleted) == {("resource.k8s.io/v1", "DeviceTaintRule")}
    assert "spec" not in a["patch"]  # never cordoned: the node's spec is left alone
    assert a["patch"]["metadata"]["annotations"][health_checks.ANN_CORDONED_BY] is None


def test_a_rule_is_not_weakened_while_the_node_stays_quarantined():
    first = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER)))
    existing = first["device_taint_rules"]["apply"]
    hot = health_checks.evaluate_host(verdict(g3={"temperature_c": 99}))
    out = plan({NODE: hot}, nodes(node(NODE, quarantined=True), node(OTHER)), existing)
    assert out["device_taint_rules"]["apply"] == []  # NoExecute kept, nothing to write


def test_dry_run_plans_but_applies_and_deletes_nothing():
    out = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER)), policy={"dry_run": True})
    assert out["device_taint_rules"] == {"apply": [], "delete": []}
    assert action_of(out, NODE)["device_taint_rules"] == {3: "NoExecute"}


def test_circuit_breaker_blocks_the_rules_too():
    # 6 nodes, fraction 0.2 -> limit 1; OTHER already quarantined: NODE is blocked
    out = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER, quarantined=True)),
               policy={"max_unhealthy_fraction": 0.2})
    assert action_of(out, NODE)["action"] == "blocked"
    assert out["device_taint_rules"]["apply"] == []


def test_a_problem_naming_no_gpu_cordons_the_node_as_before():
    v = health_checks.evaluate_host(facts(3), expected_gpus=4)
    out = plan({NODE: v}, nodes(node(NODE), node(OTHER)))
    a = action_of(out, NODE)
    assert a["scope"] == "node"
    assert a["patch"]["spec"]["unschedulable"] is True
    assert out["device_taint_rules"]["apply"] == []


def test_a_failing_gpu_without_devices_in_the_slices_cordons_the_node():
    f = facts(5)
    f["gpus"][4]["ecc_errors"]["volatile_uncorrected"] = 30
    out = plan({NODE: health_checks.evaluate_host(f)}, nodes(node(NODE), node(OTHER)))
    a = action_of(out, NODE)
    assert a["scope"] == "node" and a["patch"]["spec"]["unschedulable"] is True
    assert "GPU 4: no devices in the node's ResourceSlices" in a["reason"]


def test_nodes_not_in_dra_dynamic_mode_are_cordoned_as_before():
    out = plan({NODE: ecc_on_gpu3()}, nodes(node(NODE), node(OTHER)), dra=())
    a = action_of(out, NODE)
    assert a["patch"]["spec"]["unschedulable"] is True and "scope" not in a
    assert out["device_taint_rules"]["apply"] == []


def test_unknown_dra_node_is_refused():
    with pytest.raises(GpuOpsError, match="dra_dynamic_nodes name nodes that are not in the node list: nope"):
        plan({}, nodes(node(NODE)), dra=("nope",))
