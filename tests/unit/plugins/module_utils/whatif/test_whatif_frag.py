# -*- coding: utf-8 -*-
"""The fragmentation measure and FGD's scores, against hand computations of the paper's definition."""
import math
import random

import numpy as np
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data, engine, frag, workload


def cluster(*nodes):
    return engine.Cluster([whatif_data.Node(name, cpu, 1 << 20, gpus, model, None, {}) for name, cpu, gpus, model in nodes])


def rows(c, lefts):
    gl = np.full((c.n, c.g), -1, dtype=np.int64)
    for i, left in enumerate(lefts):
        gl[i, :len(left)] = left
    return gl


def test_typical_pods_cover_the_threshold_most_frequent_first():
    shapes = [(1000, 500, 1, ())] * 50 + [(2000, 1000, 1, ())] * 30 + [(100, 0, 0, ())] * 15 + [(8000, 1000, 8, ())] * 5
    assert workload.typical_pods(shapes, 95) == [((1000, 500, 1, ()), 50), ((2000, 1000, 1, ()), 30), ((100, 0, 0, ()), 15)]
    assert workload.typical_pods(shapes, 100)[-1] == ((8000, 1000, 8, ()), 5)
    # equal counts: the larger shape first (the artefact sorts in reverse)
    assert [s for s, n in workload.typical_pods([(1, 1, 1, ()), (2, 1, 1, ())], 100)] == [(2, 1, 1, ()), (1, 1, 1, ())]


def test_node_fragmentation_by_hand():
    # typical pods: 50 % need 600 milli and 4 CPUs, 25 % are CPU-only, 25 % need 2 whole T4 GPUs
    items = [((4000, 600, 1, ()), 2), ((1000, 0, 0, ()), 1), ((2000, 1000, 2, ("T4",)), 1)]
    c = cluster(("g2", 8000, 2, "G2"), ("t4", 8000, 2, "T4"), ("small", 2000, 2, "T4"), ("cpu", 8000, 0, None))
    typ = frag.Typical(items, c.models)
    gl = rows(c, [[1000, 500], [1000, 1000], [1000, 1000], []])
    cpu = np.array([8000, 8000, 2000, 8000])
    nf = frag.NodeFrag(typ, c, gl, cpu)
    got = nf.node_milli()
    # g2: L=1500. 600-pod fits (GPU0): frag 500 (GPU1 < 600); CPU pod: 1500; T4 pod: not accessible: 1500
    assert got[0] == pytest.approx(0.5 * 500 + 0.25 * 1500 + 0.25 * 1500)
    # t4: L=2000. 600-pod fits: 0; CPU pod: 2000; 2 x T4 fits: 0
    assert got[1] == pytest.approx(0.25 * 2000)
    # small: CPU left 2000 < 4000 for the 600-pod: all 2000; CPU pod 2000; 2 x T4 needs 2000 CPU: fits: 0
    assert got[2] == pytest.approx(0.5 * 2000 + 0.25 * 2000)
    assert got[3] == 0.0
    assert nf.total() == pytest.approx(float(got.sum()))


def _ref_frag(model, cpu_left, left, items):
    total = float(sum(n for shape, n in items))
    out = 0.0
    for (cpu, milli, num, spec), n in items:
        p = n / total
        whole = sum(left)
        if milli == 0 or (spec and model not in spec):
            out += p * whole
        elif sum(1 for x in left if x >= milli) >= num and cpu_left >= cpu:
            out += p * sum(x for x in left if x < milli)
        else:
            out += p * whole
    return out


def test_fgd_scores_match_the_definition_on_random_states():
    rng = random.Random(7)
    items = [((rng.choice([2000, 4000, 8000]), rng.choice([0, 120, 250, 460, 500, 1000]), 1, rng.choice([(), ("T4",)])),
              rng.randint(1, 9)) for dummy in range(12)] + [((16000, 1000, 4, ()), 3), ((32000, 1000, 8, ()), 2)]
    items = [((cpu, milli, num if milli else 0, spec), n) for (cpu, milli, num, spec), n in items]
    nodes = [("n%d" % i, rng.choice([16000, 64000]), rng.choice([1, 2, 4, 8]), rng.choice(["T4", "G2"])) for i in range(60)]
    c = cluster(*nodes)
    typ = frag.Typical(items, c.models)
    lefts = [[rng.choice([0, 100, 500, 540, 880, 1000, 1000]) for dummy in range(node[2])] for node in nodes]
    cpu = np.array([rng.randrange(0, n[1] + 1) for n in nodes])
    gl = rows(c, lefts)
    nf = frag.NodeFrag(typ, c, gl, cpu)
    for i, node in enumerate(nodes):
        model = node[3]
        assert nf.node_milli()[i] == pytest.approx(_ref_frag(model, cpu[i], lefts[i], items), abs=1e-9)

    def sig_score(delta):
        return int(100.0 / (1.0 + math.exp(-delta / 1000.0)))

    idx = np.arange(c.n)
    for pod_cpu, milli, num in [(4000, 460, 1), (8000, 1000, 1), (2000, 0, 0), (16000, 1000, 4)]:
        scores, gpus = nf.fgd(idx, gl, cpu, pod_cpu, num, milli)
        for i, node in enumerate(nodes):
            model = node[3]
            left = lefts[i]
            before = _ref_frag(model, cpu[i], left, items)
            if num == 1 and milli < 1000:
                options = []
                for g, x in enumerate(left):
                    if x >= milli:
                        after = list(left)
                        after[g] -= milli
                        options.append((sig_score(before - _ref_frag(model, cpu[i] - pod_cpu, after, items)), -g))
                if not options:
                    continue
                best = max(options)
                assert (scores[i], gpus[i]) == (best[0], -best[1]), i
            else:
                free = [g for g, x in enumerate(left) if x == 1000]
                if len(free) < num:
                    continue
                after = list(left)
                for g in free[:num]:
                    after[g] = 0
                assert scores[i] == sig_score(before - _ref_frag(model, cpu[i] - pod_cpu, after, items)), i


def test_unchanged_fragmentation_scores_exactly_50():
    # a CPU pod that crosses no CPU threshold leaves F unchanged: sigmoid(0) = 0.5 -> 50, never 49
    items = [((8000, 500, 1, ()), 3), ((1000, 0, 0, ()), 1)]
    c = cluster(("a", 64000, 2, "G2"))
    typ = frag.Typical(items, c.models)
    gl = rows(c, [[1000, 330]])
    nf = frag.NodeFrag(typ, c, gl, np.array([64000]))
    scores = nf.fgd(np.arange(1), gl, np.array([64000]), 1000, 0, 0)[0]
    assert scores.tolist() == [50]
