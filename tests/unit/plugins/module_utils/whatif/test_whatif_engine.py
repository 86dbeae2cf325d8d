# -*- coding: utf-8 -*-
"""Replay engines: filter, policies, tie-breaking, GPU choice, the unit model and kube-default."""
import os
import random

import numpy as np
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data, engine, frag, metrics, mig, runner, workload

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def nodes(*specs):
    """(name, cpu, mem, gpus, model) -> Node list."""
    return [whatif_data.Node(n, cpu, mem, g, m, None, {}) for n, cpu, mem, g, m in specs]


def pod(cpu, mem, num, milli, spec=()):
    return (cpu, mem, num, milli, num * milli, spec)


def replay(ns, arrivals, scoring, seed=1, cls="milli", typical=None, **kw):
    c = engine.Cluster(ns)
    items = typical or [((max(a[0], 100), a[3], a[2], a[5]), 1) for a in arrivals]
    typ = frag.Typical(workload.typical_pods([s for s, n in items for dummy in range(n)], 100), c.models)
    rng = random.Random(seed)
    if cls == "milli":
        r = engine.MilliReplay(c, arrivals, scoring, typ, rng, **kw)
    else:
        table, lay = cls
        r = engine.SliceReplay(c, arrivals, scoring, table, lay, typ, rng, **kw)
    ev = r.run()
    return r, ev


def test_filter_cpu_memory_model_and_gpus():
    ns = nodes(("t4", 8000, 1000, 2, "T4"), ("g2", 64000, 100000, 8, "G2"))
    arr = [pod(16000, 10, 1, 500), pod(1000, 5000, 0, 0), pod(1000, 10, 1, 300, ("T4",)), pod(1000, 10, 1, 300, ("A10",)),
           pod(1000, 10, 8, 1000), pod(1000, 10, 1, 800)]
    r, ev = replay(ns, arr, "best-fit")
    # 16 CPUs and 5000 MiB only fit g2; the T4-only pod goes to t4; no A10 anywhere; the 8-GPU pod
    # needs 8 fully free GPUs but g2 lost one to the 500-milli pod; best fit puts the 800 on t4
    assert ev.placed.tolist() == [True, True, True, False, False, True]
    assert r.failed == [3, 4]
    assert r.gl[0].tolist() == [700, 200, -1, -1, -1, -1, -1, -1]
    assert sorted(r.gl[1].tolist()) == [500] + [1000] * 7
    assert ev.arrived[-1] == 500 + 300 + 300 + 8000 + 800


def test_pod_slots_limit():
    ns = [whatif_data.Node("a", 8000, 1000, 1, "T4", 2, {})]
    r, ev = replay(ns, [pod(10, 1, 0, 0)] * 3, "random")
    assert ev.placed.tolist() == [True, True, False]


def test_best_fit_packs_and_prefers_the_fullest_gpu():
    ns = nodes(("a", 32000, 1 << 20, 2, "G2"), ("b", 32000, 1 << 20, 2, "G2"))
    r, ev = replay(ns, [pod(1000, 1, 1, 600), pod(1000, 1, 1, 300), pod(1000, 1, 1, 100)], "best-fit")
    used = [sorted(r.gl[i, :2].tolist()) for i in range(2)]
    assert sorted(used) == [[0, 1000], [1000, 1000]]  # all three on one GPU of one node


def test_random_is_reproducible_and_spreads():
    ns = nodes(*[("n%d" % i, 32000, 1 << 20, 1, "G2") for i in range(20)])
    arr = [pod(1000, 1, 1, 100)] * 20
    r1 = replay(ns, arr, "random", seed=3)[0]
    r2 = replay(ns, arr, "random", seed=3)[0]
    assert np.array_equal(r1.gl, r2.gl)
    assert (r1.gl[:, 0] < 1000).sum() > 5


def test_ties_by_fixed_rank_pack_while_random_ties_spread():
    ns = nodes(*[("n%d" % i, 1 << 40, 1 << 40, 8, "G2") for i in range(30)])
    arr = [pod(0, 0, 0, 0)] * 40  # CPU-free pods: every node scores the same under clustering (0)
    r = replay(ns, arr, "clustering", tie_break="rank")[0]
    assert (r.pods_left < r.c.pods).sum() == 1  # all on the node of lowest rank
    assert int(np.argmin(r.rank)) == int(np.flatnonzero(r.pods_left < r.c.pods)[0])
    r = replay(ns, arr, "clustering", tie_break="random")[0]
    assert (r.pods_left < r.c.pods).sum() > 5
    with pytest.raises(GpuOpsError, match="tie_break"):
        replay(ns, arr, "clustering", tie_break="first")


def test_packing_scores():
    ns = nodes(("idle", 32000, 1 << 20, 4, "G2"), ("used", 32000, 1 << 20, 4, "G2"))
    c = engine.Cluster(ns)
    typ = frag.Typical([((1000, 500, 1, ()), 1)], c.models)
    r = engine.MilliReplay(c, [], "packing", typ, random.Random(0))
    r.gl[1] = [300, 1000, 1000, 1000]
    r.full[1] = 3
    idx = np.arange(2)
    # idle node: 33 - 4 free GPUs; used node, share pod fits the 300-left GPU: 100 - 30/10
    assert r.score_packing(idx, 1, 200).tolist() == [29, 97]
    # does not fit the partly used GPU: it needs a free one on a used node: 50 - 1
    assert r.score_packing(idx, 1, 500).tolist() == [29, 49]
    assert r.score_packing(idx, 2, 1000).tolist() == [29, 48]
    assert r.score_packing(idx, 0, 0).tolist() == [0, 0]


def test_best_fit_and_dot_product_formulas():
    ns = nodes(("a", 64000, 1 << 20, 8, "G2"))
    c = engine.Cluster(ns)
    r = engine.MilliReplay(c, [], "best-fit", frag.Typical([((1000, 500, 1, ()), 1)], c.models), random.Random(0))
    idx = np.arange(1)
    # 1 - (0.5 (64000-8000)/128000 + 0.5 (8000-1000)/8000) = 0.34375 -> 34
    assert r._score_best_fit(idx, 8000, 1000.0).tolist() == [34]
    # 1 - (64000*8000/128000^2 + 8000*1000/8000^2) / 2 = 1 - (0.03125 + 0.125) / 2 -> 92
    assert r._score_dot(idx, 8000, 1000.0).tolist() == [92]


def test_clustering_prefers_nodes_with_the_same_kind():
    ns = nodes(("share", 64000, 1 << 20, 8, "G2"), ("whole", 64000, 1 << 20, 8, "G2"), ("idle", 64000, 1 << 20, 8, "G2"))
    r = replay(ns, [pod(1000, 1, 1, 200)], "clustering", seed=2)[0]
    # put one share pod on "share" and one whole pod on "whole" by hand, then compare
    c = r.c
    r = engine.MilliReplay(c, [], "clustering", r.typ, random.Random(0))
    r.aff[0, r._kind(1, 200)] = 1
    r.aff[1, r._kind(1, 1000)] = 1
    s = r._score_clustering(np.arange(3), 1, 300).tolist()
    assert s[0] > s[2] > s[1]


def test_fgd_on_the_trace_sample_beats_random_fragmentation():
    c_nodes = whatif_data.read_nodes_csv(os.path.join(FIX, "openb_nodes_sample.csv"))
    pods = whatif_data.read_pods_csv(os.path.join(FIX, "openb_pods_sample.csv"))
    out = {}
    for scoring in ("random", "fgd"):
        allocs = []
        for seed in (1, 2, 3):
            p = runner.normalise({"nodes_csv": "x", "pods_csv": "y", "seed": seed})
            c = engine.Cluster(c_nodes)
            seq, rng = runner.arrivals_for(pods, c.total_milli, p, seed)[:2]
            ev, eng = runner.replay(c, c_nodes, pods, seq, rng, scoring, "fractional", p)
            allocs.append(metrics.at(metrics.curve(ev, c.total_milli), 100))
        out[scoring] = sum(allocs) / 3.0
    assert out["fgd"] > out["random"]


def test_unit_model_equals_milli_model_under_exclusive():
    ns = whatif_data.read_nodes_csv(os.path.join(FIX, "openb_nodes_sample.csv"))
    pods = whatif_data.read_pods_csv(os.path.join(FIX, "openb_pods_gpuspec_sample.csv"))
    p = runner.normalise({"nodes_csv": "x", "pods_csv": "y"})
    for scoring in engine.SCORINGS:
        c = engine.Cluster(ns)
        seq, rng = runner.arrivals_for(pods, c.total_milli, p, 5)[:2]
        state = rng.getstate()
        ev1 = runner.replay(c, ns, pods, seq, rng, scoring, "exclusive", p)[0]
        rng2 = random.Random()
        rng2.setstate(state)
        typ = frag.Typical(runner.typical_for(pods, "exclusive"), c.models)
        table, lay = mig.exclusive_layouts(ns)
        eng = engine.SliceReplay(c, runner.engine_arrivals(seq, "exclusive"), scoring, table, lay, typ, rng2)
        ev2 = eng.run()
        assert np.array_equal(ev1.placed, ev2.placed), scoring
        assert np.allclose(ev1.allocated, ev2.allocated) and np.allclose(ev1.frag, ev2.frag), scoring


def test_mig_units_take_the_smallest_fitting_slice():
    ns = nodes(("a", 1 << 40, 1 << 40, 1, "a100_80gb"))
    table, lay = mig.static_layouts(ns, {"a100_80gb": {"1g.10gb": 3, "2g.20gb": 1, "3g.40gb": 0}})
    # 120 milli fits 1g.10gb (1/7 compute, 1/8 memory); 130 needs more memory: 2g.20gb; 600: a whole GPU
    r, ev = replay(ns, [pod(1, 1, 1, 120)] * 3 + [pod(1, 1, 1, 130), pod(1, 1, 1, 120), pod(1, 1, 1, 600)], "best-fit",
                   cls=(table, lay))
    assert ev.placed.tolist() == [True, True, True, True, False, False]
    assert ev.allocated[3] == pytest.approx(1000 * (3 / 7.0 + 2 / 7.0))
    assert ev.served[3] == 3 * 120 + 130


def test_mig_whole_gpu_pods_use_gpus_without_mig():
    ns = nodes(("a", 1 << 40, 1 << 40, 2, "G2"))
    cfg = {"G2": [{"devices": "all", "mig-enabled": False}, {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    table, lay = mig.static_layouts(ns, cfg)
    assert lay == [[[0], [1] * 7]]
    r, ev = replay(ns, [pod(1, 1, 1, 1000)] + [pod(1, 1, 1, 100)] * 8 + [pod(1, 1, 1, 1000)], "fgd", cls=(table, lay))
    assert ev.placed.tolist() == [True] + [True] * 7 + [False, False]
    assert ev.allocated[-1] == pytest.approx(2000)
    curve = metrics.curve(ev, 2000)
    assert curve[-1]["allocated_pct"] == 100.0


def test_kube_default_least_allocated_spreads_and_balanced():
    ns = nodes(("a", 64000, 262144, 8, "G2"), ("b", 64000, 262144, 8, "G2"))
    r, ev = replay(ns, [pod(8000, 32768, 1, 1000), pod(8000, 32768, 1, 1000)], "kube-default")
    assert sorted(r.cpu_left.tolist()) == [56000, 56000]  # one on each node
    c = engine.Cluster(ns)
    k = engine.MilliReplay(c, [], "kube-default", r.typ, random.Random(0))
    # empty node: least (87 + 87) / 2 = 87; balanced with pod: fractions equal: 100, without: 100 -> 75
    assert k._score_kube(np.arange(1), 8000, 32768).tolist() == [87 + 75]


def test_kube_default_scores_a_sample_of_large_clusters():
    ns = nodes(*[("n%03d" % i, 64000, 262144, 8, "G2") for i in range(250)])
    c = engine.Cluster(ns)
    k = engine.MilliReplay(c, [], "kube-default", frag.Typical([], c.models), random.Random(0))
    f = np.ones(250, dtype=bool)
    first = k._nodes_to_score(f)
    # 250 nodes: 50 - 250/125 = 48 % -> 120 nodes from index 0; the next pod starts at 120
    assert len(first) == 120 and first[0] == 0 and k.next_start == 120
    f[130:] = False
    second = k._nodes_to_score(f)
    assert second.tolist() == list(range(120, 130)) + list(range(0, 110))
    small = engine.MilliReplay(engine.Cluster(ns[:60]), [], "kube-default", frag.Typical([], c.models), random.Random(0))
    assert len(small._nodes_to_score(np.ones(60, dtype=bool))) == 60
