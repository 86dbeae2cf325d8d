# -*- coding: utf-8 -*-
"""Arrival protocol (order, inflation) and the discrete curves."""
import random

import numpy as np
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data, engine, metrics, workload


def P(name, num=1, milli=500, created=None):
    return whatif_data.Pod(name, 1000, 100, num, milli, (), created, None)


def test_orders():
    pods = [P("b", created=5), P("a", created=5), P("c", created=1), P("d")]
    assert [p.name for p in workload.ordered(pods, "file", random.Random(0))] == ["b", "a", "c", "d"]
    assert [p.name for p in workload.ordered(pods, "creation", random.Random(0))] == ["c", "a", "b", "d"]
    s1 = [p.name for p in workload.ordered(pods, "shuffle", random.Random(4))]
    s2 = [p.name for p in workload.ordered(list(reversed(pods)), "shuffle", random.Random(4))]
    assert s1 == s2 and sorted(s1) == ["a", "b", "c", "d"]  # shuffles the name-sorted list: input order irrelevant
    with pytest.raises(GpuOpsError, match="order must be one of"):
        workload.ordered(pods, "random", random.Random(0))


def test_inflation_samples_until_the_next_pod_would_exceed_the_target():
    pods = [P("a", 1, 500), P("b", 2, 1000), P("c", 0, 0)]
    seq, added, removed = workload.inflate(list(pods), pods, 4000, 1.3, random.Random(1))
    total = sum(workload.request_milli(p) for p in seq)
    assert removed == 0 and added == len(seq) - 3
    assert 5200 - 2000 < total <= 5200  # stopped by a draw that would not fit (the largest request is 2000)
    assert all(p.name.split("-tuned-")[0] in "abc" for p in seq[3:])
    assert [p.name for p in seq[3:]] == ["%s-tuned-%d" % (p.name.split("-tuned-")[0], i) for i, p in enumerate(seq[3:])]


def test_inflation_thins_a_trace_that_requests_too_much():
    pods = [P("p%02d" % i, 1, 1000) for i in range(20)]
    seq, added, removed = workload.inflate(list(pods), pods, 10000, 1.3, random.Random(2))
    assert added == 0 and removed == 7 and len(seq) == 13
    assert [p.name for p in seq] == sorted(p.name for p in seq)  # order kept, random pods removed
    same, a, r = workload.inflate(list(pods), pods, 10000, 0, random.Random(2))
    assert (a, r, len(same)) == (0, 0, 20)


def events(arrived, allocated, frag, served=None):
    ev = engine.Events(len(arrived))
    ev.arrived[:] = arrived
    ev.allocated[:] = allocated
    ev.served[:] = served if served is not None else allocated
    ev.frag[:] = frag
    ev.idle[:] = 1000.0 - np.asarray(allocated, dtype=float)
    return ev


def test_curve_means_per_percent_with_the_neighbour_window():
    # capacity 1000 milli: 5 milli per step = 0.5 %, rounding half to even
    arrived = [5, 10, 15, 25, 40]
    ev = events(arrived, [5, 10, 15, 20, 30], [0, 0, 10, 20, 20])
    c = metrics.curve(ev, 1000)
    by_x = dict((p["arrived_pct"], p) for p in c)
    # 0.5 -> 0 (half to even), 1.0 -> 1, 1.5 -> 2, 2.5 -> 2, 4.0 -> 4; 3 has no event: mean of 2..4
    assert sorted(by_x) == [0, 1, 2, 3, 4]
    assert by_x[0]["allocated_pct"] == 0.5 and by_x[1]["allocated_pct"] == 1.0
    assert by_x[2]["allocated_pct"] == pytest.approx((1.5 + 2.0) / 2, abs=0.005)
    assert by_x[3]["allocated_pct"] == pytest.approx((1.5 + 2.0 + 3.0) / 3, abs=0.005)
    assert by_x[2]["frag_pct"] == 1.5  # mean frag 15 milli of 1000
    assert metrics.at(c, 4) == 3.0 and metrics.at(c, 100) is None
    assert metrics.index_at(ev, 1000, 2) == 3


def test_frag_ratio_is_fragmented_over_idle():
    ev = events([100], [500], [250])
    assert metrics.curve(ev, 1000)[0]["frag_ratio_pct"] == 50.0
