# -*- coding: utf-8 -*-
"""sharing dra-first-fit and dra-steered (whatif/dra.py): dynamic MIG through DRA in the replay with departures.

Expected placements are worked out by hand from the H100 80GB's placements (docs/dra.md's counters picture):
1g.10gb at memory slice 0..6, 2g.20gb at 0/2/4, 3g.40gb at 0/4, 4g.40gb at 0, 7g.80gb at 0. A pod's profile is the
smallest whose compute share (x/7) and memory share (y/8) both cover gpu_milli: 100 -> 1g.10gb, 200 -> 2g.20gb
(1g.20gb: 142.9 compute milli, too small), 400 -> 3g.40gb, 450 -> 4g.40gb (3g: 428.6 compute milli, too small).
"""
import os
import sys

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import runner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_departures import node, params, pod, replay  # noqa: E402

H100 = "h100_80gb"
THREE = [pod("a", 0, None, milli=100), pod("b", 1, None, milli=200), pod("c", 2, None, milli=450)]


def test_first_fit_spreads_the_docs_example_over_two_gpus():
    # docs/dra.md: 1g.10gb takes the first device (slice 0), 2g.20gb's first placement (0) overlaps it so it
    # takes 2, and the only 4g.40gb placement (0-3) is blocked on GPU 0: it goes to GPU 1
    dr, s = replay([node(gpus=2, model=H100)], THREE, sharing="dra-first-fit", scoring="kube-default")
    assert dr.bind == [0, 1, 2]
    assert dr.e.devices(0) == [["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-2g20gb-14-2"], ["gpu-1-mig-4g40gb-5-0"]]
    assert s["held_gpus_peak"] == 2


def test_steered_keeps_the_three_on_one_gpu():
    # steered: on the empty GPU, 1g@0..3 block 4g@0 and 1g@4/5/6 keep it (and 3g@0); of these only 1g@6 keeps
    # the three 2g placements (1g@4 and 1g@5 block 2g@4), so 1g@6. Then 2g@0 and 2g@2 block 4g@0, 2g@4 keeps it:
    # 2g@4. Then 4g@0 on the same, most used GPU
    dr, s = replay([node(gpus=2, model=H100)], THREE, sharing="dra-steered", scoring="kube-default")
    assert dr.bind == [0, 1, 2]
    assert dr.e.devices(0) == [["gpu-0-mig-1g10gb-19-6", "gpu-0-mig-2g20gb-14-4", "gpu-0-mig-4g40gb-5-0"], []]
    assert s["held_gpus_peak"] == 1


def test_first_fit_is_dra_dynamic_first_fit_without_departures():
    # the same walk as tenancy/dra_dynamic.first_fit (the model the e2e test checks against the real scheduler)
    millis = [100, 450, 200, 100, 400, 200, 100, 100, 450, 200, 400, 100]
    profiles = {100: "1g.10gb", 200: "2g.20gb", 400: "3g.40gb", 450: "4g.40gb"}
    pods = [pod("p%d" % i, i, None, milli=m) for i, m in enumerate(millis)]
    dr, dummy = replay([node(gpus=2, model=H100)], pods, sharing="dra-first-fit", scoring="kube-default")
    facts = {"driver_version": "580.95.05", "cuda_driver_version": "13.0",
             "gpus": [{"index": i, "model": H100, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%d" % i,
                       "mig_mode_current": True} for i in range(2)]}
    want = dra_dynamic.first_fit(dra_dynamic.resource_slices("n0", facts), [profiles[m] for m in millis])
    placed = [None] * len(millis)
    names = sorted(n for gpu in dr.e.devices(0) for n in gpu)
    for k in dr.where:
        q, taken = dr.where[k][1]
        (gi, dev), = taken
        placed[k] = dr.e._shape(0).names[dev].replace("gpu-0", "gpu-%d" % gi, 1)
    assert placed == want
    assert sorted(n for n in want if n) == names


def test_a_departure_destroys_the_instance_and_frees_its_counters():
    # one H100: a (4g.40gb at 0-3) runs 0..100; b (4g.40gb) arrives at 10 and waits - 4g has one placement; c
    # (3g.40gb) arrives at 20 and fits beside a at slices 4-7. b binds when a leaves, on the freed slices 0-3
    # (first in the FIFO queue); "last" (1g.10gb) finds no free memory slice until c leaves at 500
    pods = [pod("a", 0, 100, milli=450), pod("b", 10, 1000, milli=450), pod("c", 20, 500, milli=400),
            pod("last", 30, 2000, milli=100)]
    dr, s = replay([node(gpus=1, model=H100)], pods, sharing="dra-first-fit", scoring="kube-default")
    assert dr.bind == [0, 100, 20, 500]
    assert s["pods_waited"] == 2
    # everything left by the end: no instance remains, no GPU held
    assert dr.e.devices(0) == [[]] and dr.e.held_gpus() == 0


def test_a_whole_gpu_pod_on_an_ampere_shaped_gpu_takes_the_full_size_profile():
    # V100M16 cannot do MIG: it gets mig_shape a100_80gb's geometry; Ampere publishes no whole-GPU device, so a
    # whole-GPU pod takes the 7g.80gb instance (GI profile 0), and a second one waits for the GPU
    pods = [pod("w", 0, 100, milli=1000), pod("s", 5, 50, milli=100)]
    dr, dummy = replay([node(gpus=1, model="V100M16")], pods, sharing="dra-first-fit", scoring="kube-default")
    assert dr.bind == [0, None]


def test_whole_gpus_are_the_empty_gpus_in_minor_order():
    pods = [pod("s", 0, None, milli=100), pod("w", 1, None, milli=1000)]
    for sharing in ("dra-first-fit", "dra-steered"):
        dr, dummy = replay([node(gpus=3, model=H100)], pods, sharing=sharing, scoring="kube-default")
        devs = dr.e.devices(0)
        assert devs[1] == ["gpu-1"] and devs[2] == []


def test_needs_departures_and_a_scoring_of_its_own():
    with pytest.raises(GpuOpsError, match="dra-first-fit needs departures: true"):
        runner.normalise(params([node(model=H100)], THREE, sharing=["dra-first-fit"], departures=False))
    with pytest.raises(GpuOpsError, match="does not go with scoring fgd.*kube-default"):
        runner.normalise(params([node(model=H100)], THREE, sharing=["dra-steered"], scoring=["fgd"]))


def test_capacity_search_gpus_needed():
    # four 1-GPU H100 nodes, the three pods above running together for the whole trace; best-fit packs the node
    # already used. Exclusive: 3 GPUs; first fit: 2 (the 4g is blocked on the first GPU); steered: 1
    nodes = [node("n%d" % i, gpus=1, model=H100) for i in range(4)]
    pods = [pod("a", 0, 5000, milli=100), pod("b", 1, 5000, milli=200), pod("c", 2, 5000, milli=450)]
    res = runner.run(params(nodes, pods, sharing=["exclusive", "dra-first-fit", "dra-steered"], scoring=["best-fit"],
                            seeds=[1, 2, 3], capacity_search={"served_pct": 99}))
    got = dict((r["sharing"], r["capacity"]["gpus"]) for r in res["runs"])
    assert got == {"exclusive": 3, "dra-first-fit": 2, "dra-steered": 1}
    diff = res["paired"]["capacity"]
    assert diff["dra-steered"]["gpus"]["mean"] == -2 and diff["dra-first-fit"]["gpus"]["mean"] == -1


def test_steered_prefers_the_most_used_gpu():
    # two H100s. p1, p2 (2g.20gb): GPU 0, at 4 (keeps 4g@0) then at 0 (2g@0 and 2g@2 leave the same room: the
    # first published). p3 (4g.40gb) no longer fits GPU 0: GPU 1 at 0. p1 leaves at 50: GPU 0 holds 2 compute
    # slices, GPU 1 four. p4 (1g.10gb) at 60 fits both and goes to the more used GPU 1, at 6 (keeps 2g@4)
    pods = [pod("p1", 0, 50, milli=200), pod("p2", 1, None, milli=200), pod("p3", 2, None, milli=450),
            pod("p4", 60, None, milli=100)]
    dr, dummy = replay([node(gpus=2, model=H100)], pods, sharing="dra-steered", scoring="kube-default")
    assert dr.bind == [0, 1, 2, 60]
    assert dr.e.devices(0) == [["gpu-0-mig-2g20gb-14-0"], ["gpu-1-mig-1g10gb-19-6", "gpu-1-mig-4g40gb-5-0"]]


def test_ideal_gpus_perfectly_divisible():
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity, departures

    p = runner.normalise(params([node()], [pod("a", 0, 100, milli=500), pod("b", 0, 100, milli=500),
                                           pod("c", 0, 100), pod("d", 100, 300)]))
    dummy_nodes, pods = runner.load_inputs(p)
    end = departures.check_times(pods)
    # a + b + c ask for 2.0 GPUs at once, then d one from 100 to 300: 400 GPU-s in all. One pool GPU serves a and
    # b (100 GPU-s), c waits until it is deleted, d takes what a and b free (200 GPU-s): 75 %. 99 % needs 2 GPUs
    assert capacity.ideal_gpus(pods, end, {"served_pct": 99}) == 2
    assert capacity.ideal_gpus(pods, end, {"served_pct": 75}) == 1
    assert capacity.ideal_gpus(pods, end, {"served_pct": 76}) == 2
