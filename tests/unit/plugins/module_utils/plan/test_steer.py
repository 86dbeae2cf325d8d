"""Unit tests of the open-placement choice on dra-dynamic nodes (plugins/module_utils/plan/steer.py).

Expected placements worked out by hand from the H100 80GB placement table (catalog; docs/dra.md picture):
memory slices 0-7; 4g.40gb at 0 (64 SMs), 3g.40gb at 0 or 4 (60 SMs, four slices), 2g.20gb at 0/2/4 (32 SMs),
1g.20gb at 0/2/4/6, 1g.10gb and 1g.10gb+me at 0..6 (16 SMs); the GPU's counter set holds 132 SMs.
"""
import pytest

from ansible_collections.gpuops.k8s.plugins.filter.dra_open_placements import dra_open_placements
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import steer
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as dyn

NODE = "n1"


def facts(n=2, model="h100_80gb"):
    m = gpu_catalog.CATALOG[model]
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
        {"index": i, "model": model, "name": m.variants[0].nvml_name, "uuid": "GPU-%d" % i,
         "memory_total_mib": m.total_memory_mib, "mig_mode_current": True, "instances": []} for i in range(n)]}


SLICES = dyn.resource_slices(NODE, facts())


def claim(name, device, pool=NODE, ns="ns"):
    return {"metadata": {"namespace": ns, "name": name}, "status": {"allocation": {"devices": {"results": [
        {"request": "mig", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}}}}


UNSCHED = ({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 1 cannot allocate all claims. still not schedulable"},)


def pod(name, profile=None, claims=(), selector=None, conditions=UNSCHED, phase="Pending"):
    res = {"limits": {"nvidia.com/mig-" + profile: "1"}} if profile else {}
    spec = {"containers": [{"name": "c", "resources": res}],
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]}
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": {"namespace": "ns", "name": name}, "spec": spec,
            "status": {"phase": phase, "conditions": list(conditions)}}


def o(*pairs):
    return [{"profile": p, "start": s} for p, s in pairs]


IN_USE_GPU0 = [claim("a", "gpu-0-mig-4g40gb-5-0"), claim("b", "gpu-0-mig-2g20gb-14-4"),
               claim("c", "gpu-0-mig-1g10gb-19-6")]


def test_pending_3g_goes_to_slices_4_to_7_of_the_idle_gpu_and_everything_in_use_stays_open():
    # GPU 0: 64+32+16 = 112 of 132 SMs in use, 60 more do not fit. GPU 1 idle: 3g.40gb at 0 leaves 10 devices
    # allocatable (3g@4, 2g@4, 1g.20gb@4/6, 1g.10gb@4-6, +me@4-6), at 4 it leaves 14 (4g@0, 3g@0, 2g@0/2,
    # 1g.20gb@0/2, 1g.10gb@0-3, +me@0-3): slices 4-7.
    out = steer.open_placements(SLICES, IN_USE_GPU0, [pod("p", "3g.40gb")])
    assert out["nodes"][NODE]["open"] == {
        "0": o(("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)),
        "1": o(("3g.40gb", 4))}
    assert [p["device"] for p in out["nodes"][NODE]["placed"]] == ["gpu-1-mig-3g40gb-9-4"]
    assert sorted(u["claim"] for u in out["nodes"][NODE]["in_use"]) == ["ns/a", "ns/b", "ns/c"]
    assert out["unplaced"] == []
    assert out["summary"][1:] == ["n1 GPU 0 open: 4g.40gb@0, 2g.20gb@4, 1g.10gb@6", "n1 GPU 1 open: 3g.40gb@4"]


def test_two_pending_3g_take_both_3g_placements():
    out = steer.open_placements(SLICES, IN_USE_GPU0, [pod("p1", "3g.40gb"), pod("p2", "3g.40gb")])
    assert out["nodes"][NODE]["open"]["1"] == o(("3g.40gb", 0), ("3g.40gb", 4))


def test_idle_node_packs_4g_2g_1g_onto_one_gpu():
    # largest first: 4g only at 0 (GPU 0 on the tie); 2g: GPU 0 leaves 36 SMs, GPU 1 100 -> GPU 0, where 0 and 2
    # overlap the 4g -> 4; 1g.10gb: GPU 0, slices 4-5 taken, 7 is no 1g.10gb start -> 6. GPU 1 stays open (no entry).
    pods = [pod("p1", "1g.10gb"), pod("p2", "2g.20gb"), pod("p3", "4g.40gb")]
    out = steer.open_placements(SLICES, [], pods)
    assert out["nodes"][NODE]["open"] == {"0": o(("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6))}
    closed = steer.open_placements(SLICES, [], pods, close_idle=True)
    assert closed["nodes"][NODE]["open"]["1"] == []


def test_best_fit_fills_the_partly_used_gpu_first():
    # GPU 0 has 3g@4 (72 SMs left), GPU 1 is idle: 2g.20gb goes to GPU 0 (40 left, against 100); 2g@0 and 2g@2 each
    # leave 6 devices (the other 2g, 1g.20gb, two 1g.10gb, two +me): the lower start.
    out = steer.open_placements(SLICES, [claim("x", "gpu-0-mig-3g40gb-9-4")], [pod("p", "2g.20gb")])
    assert out["nodes"][NODE]["open"] == {"0": o(("2g.20gb", 0), ("3g.40gb", 4))}


def test_in_use_placements_stay_open_without_demand_and_whole_gpu_claims_leave_the_gpu_out():
    out = steer.open_placements(SLICES, [claim("a", "gpu-0-mig-1g10gb-19-0"), claim("w", "gpu-1")], [])
    assert out["nodes"][NODE]["open"] == {"0": o(("1g.10gb", 0))}
    assert {"gpu": 1, "profile": None, "start": None, "device": "gpu-1", "claim": "ns/w"} in out["nodes"][NODE]["in_use"]


def test_demand_that_fits_nowhere_is_unplaced_with_the_reason():
    full = [claim("a", "gpu-0-mig-7g80gb-0-0"), claim("b", "gpu-1-mig-7g80gb-0-0")]
    out = steer.open_placements(SLICES, full, [pod("p", "1g.10gb")])
    assert out["nodes"][NODE]["open"] == {"0": o(("7g.80gb", 0)), "1": o(("7g.80gb", 0))}
    assert [u["pod"] for u in out["unplaced"]] == ["ns/p"]
    assert "no dra-dynamic node" in out["unplaced"][0]["reason"]


def test_pending_pods_through_claims_classes_and_node_selectors():
    classes = [{"metadata": {"name": "team-2g"}, "spec": {"selectors": [{"cel": {"expression":
               "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}]}}]
    pending_claim = {"metadata": {"namespace": "ns", "name": "c2"}, "spec": {"devices": {"requests": [
        {"name": "mig", "exactly": {"deviceClassName": "team-2g", "count": 1}}]}}}
    by_name = {"metadata": {"namespace": "ns", "name": "c1"}, "spec": {"devices": {"requests": [
        {"name": "mig", "exactly": {"deviceClassName": "mig-1g.10gb.nvidia.com"}}]}}}
    pods = [pod("via-class", claims=["c2"]), pod("via-name", claims=["c1"]),
            pod("elsewhere", "3g.40gb", selector={"pool": "b"}),
            pod("cpu", "3g.40gb", conditions=(dict(UNSCHED[0], message="0/3 nodes are available: 3 Insufficient cpu"),)),
            pod("running", "7g.80gb", phase="Running")]
    k8s_nodes = [{"metadata": {"name": NODE, "labels": {"pool": "a"}}}]
    out = steer.open_placements(SLICES, [pending_claim, by_name], pods, k8s_nodes=k8s_nodes, classes=classes)
    assert sorted((p["pod"], p["profile"]) for p in out["nodes"][NODE]["placed"]) == [
        ("ns/via-class", "2g.20gb"), ("ns/via-name", "1g.10gb")]
    assert [u["pod"] for u in out["unplaced"]] == ["ns/elsewhere"]
    assert [i["pod"] for i in out["ignored"]] == ["ns/cpu"]


def test_the_open_map_is_what_the_steering_rules_take():
    out = steer.open_placements(SLICES, IN_USE_GPU0, [pod("p", "3g.40gb")])
    rules = dyn.steering_rules(SLICES, out["nodes"][NODE]["open"])
    closed = set(r["spec"]["deviceSelector"]["device"] for r in rules)
    # 26 devices per H100 (whole GPU, 7g, 4g, 2x 3g, 3x 2g, 4x 1g.20gb, 7x 1g.10gb, 7x +me): 23 + 25 closed
    assert len(rules) == 48
    assert "gpu-1-mig-3g40gb-9-4" not in closed and "gpu-1-mig-3g40gb-9-0" in closed
    assert not closed & {"gpu-0-mig-4g40gb-5-0", "gpu-0-mig-2g20gb-14-4", "gpu-0-mig-1g10gb-19-6"}
    assert all(r["metadata"]["labels"][dyn.STEERING_LABEL] == "closed" for r in rules)


def test_bad_input_is_refused_naming_it():
    with pytest.raises(GpuOpsError, match="gpu-0-mig-9g-1-0"):
        steer.open_placements(SLICES, [claim("a", "gpu-0-mig-9g-1-0")], [])
    with pytest.raises(GpuOpsError, match="list of ResourceSlices"):
        steer.open_placements({"not": "a list"})
    out = steer.open_placements(SLICES, [], [], nodes=[NODE, "n2"])
    assert [s["node"] for s in out["skipped"]] == ["n2"]


def test_filter_wraps_the_function():
    assert dra_open_placements(SLICES, IN_USE_GPU0, [pod("p", "3g.40gb")])["nodes"][NODE]["open"]["1"] == o(
        ("3g.40gb", 4))
