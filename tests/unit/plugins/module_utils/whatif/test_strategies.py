# -*- coding: utf-8 -*-
"""The strategies of the replay with departures (issue 33): priority and preemption, the autoscaler, planned by
concurrent demand, node-level re-plans. Hand-made clusters; every expected value is worked out in the comments."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures, preemption, runner, timed
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

PRIO = {"hi": 10, "mid": 5, "lo": 0}


def node(name, model, gpus=2, cpu=64000, mem=262144):
    return {"name": name, "gpus": [{"model": model, "count": gpus}], "cpu_milli": cpu, "memory_mib": mem}


def pod(name, created, deleted, qos, num=1, spec=None, milli=1000):
    out = {"name": name, "cpu_milli": 1000, "memory_mib": 1024, "num_gpu": num, "gpu_milli": milli,
           "creation_time": created, "deletion_time": deleted, "qos": qos}
    if spec:
        out["gpu_spec"] = spec
    return out


def replay(nodes, pods, priorities="test-default", sharing="exclusive", **kw):
    priorities = dict(PRIO) if priorities == "test-default" else priorities  # None: no priorities
    p = runner.normalise({"nodes": nodes, "pods": pods, "departures": True, "inflation": 0, "order": "file",
                          "scoring": ["best-fit"], "sharing": [sharing], "priorities": priorities, **kw})
    nodes_all, pods_in = runner.load_inputs(p)
    end = departures.check_times(pods_in)
    cluster = whatif_engine.Cluster(nodes_all)
    seq, rng, dummy_a, dummy_r = runner.arrivals_for(pods_in, cluster.total_milli, p, 42)
    eng, rp = timed.build(cluster, nodes_all, pods_in, seq, rng, "best-fit", sharing, p)
    pre = preemption.Preemptor(preemption.pod_priorities(seq, p["priorities"]), 1) if p["priorities"] else None
    dr = departures.DepartureReplay(eng, seq, end, rp, preemptor=pre)
    if pre is not None:
        pre.attach(dr)
    dr.run()
    return dr, departures.summarise(dr)


def names_on(dr, node_index):
    return sorted(dr.seq[k].name for k, (n, dummy_g, dummy_a) in dr.where.items() if n == node_index)


# n0 (V100M16) and n1 (V100M32), 2 GPUs each; the gpu_spec pins the first pods to a node
TWO = [node("n0", "V100M16"), node("n1", "V100M32")]


def test_preemption_takes_the_node_whose_highest_victim_is_lowest_and_victims_requeue():
    # n0: a, b (lo); n1: c (mid), d (lo). P (hi, 2 GPUs, any model) at 10 fits nowhere.
    # n0 needs victims {a, b} (highest priority 0), n1 {c, d} (highest 5): n0 wins.
    pods = [pod("a", 0, 1000, "lo", spec="V100M16"), pod("b", 0, 1000, "lo", spec="V100M16"),
            pod("c", 0, 1000, "mid", spec="V100M32"), pod("d", 0, 1000, "lo", spec="V100M32"),
            pod("P", 10, 110, "hi", num=2)]
    dr, s = replay(TWO, pods)
    assert dr.bind[4] == 10
    # a and b went back to pending at 10 and bound again at 110 when P left
    assert dr.last_bind == {0: 110, 1: 110}
    assert dr.bind[:4] == [0, 0, 0, 0]  # the first binding is what the start delay counts
    assert dr.pre.evictions == 2 and s["pods_never_placed"] == 0
    # served: a, b ran 10 + 890 s of their 1000; c, d and P all their time: (900 + 900 + 1000 + 1000 + 2 x 100)
    # / (4 x 1000 + 200) GPU-seconds
    assert s["served_pct"] == round(100.0 * 4000 / 4200, 3)
    by = preemption.by_priority(dr, departures.percentile)
    assert by["10"]["served_pct"] == 100.0 and by["10"]["start_delay_p95_s"] == 0.0
    assert by["0"]["served_pct"] == round(100.0 * 2800 / 3000, 3) and by["0"]["pods_preempted"] == 2
    assert by["5"]["pods_preempted"] == 0


def test_preemption_prefers_fewer_victims_and_reprieves_the_earlier_started():
    # n0: a (lo, both GPUs); n1: c, d (lo, one GPU each). P (hi, 2 GPUs): n0 costs one victim (sum of the
    # shifted priorities 2^31), n1 two (2 x 2^31): n0, victim a.
    # (no deletion times: the pods are still where they were at the trace's end, 10)
    pods = [pod("a", 0, None, "lo", num=2, spec="V100M16"), pod("c", 0, None, "lo", spec="V100M32"),
            pod("d", 1, None, "lo", spec="V100M32"), pod("P", 10, None, "hi", num=2)]
    dr, dummy = replay(TWO, pods)
    assert names_on(dr, 0) == ["P"] and names_on(dr, 1) == ["c", "d"]
    # one GPU needed on a node of two lo pods: the one started later (d, at 1) is the victim, c is reprieved
    nodes = [node("n0", "V100M16"), node("n1", "V100M32")]
    pods = [pod("e", 0, None, "hi", num=2, spec="V100M16"), pod("c", 0, None, "lo", spec="V100M32"),
            pod("d", 1, None, "lo", spec="V100M32"), pod("P", 10, None, "hi")]
    dr, s = replay(nodes, pods)
    assert names_on(dr, 1) == ["P", "c"]
    assert list(dr.pending) == [2] and s["pods_never_placed"] == 0  # d waits (it ran 1..10: placed once)


def test_no_preemption_without_priorities_or_among_equals():
    pods = [pod("a", 0, 1000, "lo", num=2, spec="V100M16"), pod("c", 0, 1000, "lo", num=2, spec="V100M32"),
            pod("P", 10, 1000, "lo", num=2)]
    dr, dummy = replay(TWO, pods)  # same priority: P waits
    assert dr.bind[2] is None and dr.pre.evictions == 0
    pods[2]["qos"] = "hi"
    dr, dummy = replay(TWO, pods, priorities=None)  # no priorities: FIFO, nothing preempted
    assert dr.bind[2] is None and dr.pre is None


def test_pending_queue_highest_priority_first():
    # one GPU busy until 100; lo arrives at 1, hi at 2: hi binds at 100, lo when hi leaves (200)
    nodes = [node("n0", "V100M16", gpus=1)]
    pods = [pod("x", 0, 100, "hi"), pod("lo", 1, 1000, "lo"), pod("hi", 2, 200, "hi")]
    dr, dummy = replay(nodes, pods)
    assert dr.bind == [0, 200, 100]


def test_unknown_qos_fails_naming_the_valid_ones():
    pods = [pod("a", 0, 10, "BE"), pod("b", 0, 10, "Urgent")]
    with pytest.raises(GpuOpsError) as err:
        runner.run({"nodes": TWO, "pods": pods, "departures": True, "inflation": 0, "priorities": "default"})
    assert "Urgent" in err.value.msg and "BE, Burstable, Guaranteed, LS" in err.value.msg
    with pytest.raises(GpuOpsError) as err:
        runner.normalise({"nodes": TWO, "pods": pods, "departures": True, "priorities": {"BE": "high"}})
    assert "priorities.BE must be an integer" in err.value.msg
    with pytest.raises(GpuOpsError) as err:
        runner.normalise({"nodes": TWO, "pods": pods, "priorities": "default"})
    assert "needs departures: true" in err.value.msg


def test_priorities_through_the_runner():
    pods = [pod("a", 0, 1000, "BE", num=2, spec="V100M16"), pod("c", 0, 1000, "LS", num=2, spec="V100M32"),
            pod("P", 10, 110, "LS", num=2)]
    out = runner.run({"nodes": TWO, "pods": pods, "departures": True, "inflation": 0, "order": "file",
                      "priorities": "default", "scoring": "best-fit"})
    s = out["summary"]
    assert s["evictions"] == 1
    assert s["by_priority"]["1000"]["served_pct"] == 100.0
    # a (BE): ran 10 s, evicted, back at 110 to 1000: 900 of 1000 s, 2 GPUs
    assert s["by_priority"]["0"]["served_pct"] == 90.0
    assert s["by_class"]["priority:0"]["served_pct"] == 90.0 and s["by_class"]["priority:1000"]["pods"] == 2


def test_preemption_lowest_sum_of_victim_priorities_before_latest_start():
    # P (hi, 2 GPUs). n0: two mid pods started 3 and 4; n1: a mid started 0 and a lo. Both need 2 victims of
    # highest priority 5; n1's sum (5 + 0) is lower than n0's (5 + 5): n1, although its mid victim started
    # earlier (the later rule, latest start of the highest-priority victims, would take n0).
    pods = [pod("m1", 3, None, "mid", spec="V100M16"), pod("m2", 4, None, "mid", spec="V100M16"),
            pod("m3", 0, None, "mid", spec="V100M32"), pod("l1", 0, None, "lo", spec="V100M32"),
            pod("P", 10, None, "hi", num=2)]
    dr, dummy = replay(TWO, pods)
    assert names_on(dr, 1) == ["P"] and names_on(dr, 0) == ["m1", "m2"]
    # l1 mid too: equal sums and counts; the latest start decides - the earliest start of each node's
    # highest-priority victims is 3 on n0 and 0 on n1 -> n0
    pods[3]["qos"] = "mid"
    dr, dummy = replay(TWO, pods)
    assert names_on(dr, 0) == ["P"] and names_on(dr, 1) == ["l1", "m3"]
    # and the other way round: n1's mid pods start at 5 and 6, after n0's 3 -> n1
    pods[2]["creation_time"], pods[3]["creation_time"] = 5, 6
    dr, dummy = replay(TWO, pods)
    assert names_on(dr, 1) == ["P"] and names_on(dr, 0) == ["m1", "m2"]


# ---------------------------------------------------------------------- autoscaler

def scaled(nodes, pods, cfg, sharing="exclusive"):
    """The finished DepartureReplay of one run with the autoscaler (as timed.run builds it)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler

    p = runner.normalise({"nodes": nodes, "pods": pods, "departures": True, "inflation": 0, "order": "file",
                          "scoring": ["best-fit"], "sharing": [sharing], "autoscaler": cfg})
    nodes_all, pods_in = runner.load_inputs(p)
    end = departures.check_times(pods_in)
    pool, initial = autoscaler.pool_nodes(nodes_all, p["autoscaler"], 0.5)
    cluster = whatif_engine.Cluster(pool)
    seq, rng, dummy_a, dummy_r = runner.arrivals_for(pods_in, cluster.total_milli, p, 42)
    eng, rp = timed.build(cluster, pool, pods_in, seq, rng, "best-fit", sharing, p)
    asc = autoscaler.Autoscaler(p["autoscaler"], cluster, initial)
    dr = departures.DepartureReplay(eng, seq, end, rp, autoscaler=asc)
    asc.attach(dr)
    dr.run()
    return dr, departures.summarise(dr)


def test_autoscaler_adds_a_node_after_the_delay_and_removes_it_when_idle():
    # two nodes of one shape (2 GPUs), one up (min_nodes 1). a takes both GPUs at 0; b (1 GPU) arrives at 10,
    # pends, a node is asked for at 10 and is Ready at 110 (scale_up_delay_s 100): b binds at 110, leaves at
    # 500; the node is empty from 500 and removed at 550 (scale_down_after_s 50). At 1000 a leaves; its node
    # stays (min_nodes 1). c at 2000 keeps the trace running.
    nodes = [node("n0", "V100M16"), node("n1", "V100M16")]
    pods = [pod("a", 0, 1000, None, num=2), pod("b", 10, 500, None), pod("c", 2000, 2001, None, num=0, milli=0)]
    cfg = {"scale_up_delay_s": 100, "scale_down_after_s": 50, "min_nodes": 1, "max_nodes": 2}
    dr, s = scaled(nodes, pods, cfg)
    assert dr.bind[:2] == [0, 110]
    assert (dr.asc.scale_ups, dr.asc.scale_downs) == (1, 1)
    # provisioned: 2 GPUs 0..10, 4 GPUs 10..550 (billed from the request), 2 GPUs 550..2001
    assert dr.integral["provisioned"] == 2 * 10 + 4 * 540 + 2 * 1451
    assert s["gpu_hours_provisioned"] == round((20 + 2160 + 2902) / 3600.0, 2)
    assert dr.asc.up.sum() == 1 and dr.provisioned == 2


def test_autoscaler_from_zero_takes_the_least_wasteful_group_and_respects_max_nodes():
    # groups: 8 GPUs and 2 GPUs; min_nodes 0: nothing up. a (1 GPU) at 0 -> the 2-GPU group (6 GPUs less
    # waste), Ready at 30. b and c (2 GPUs each) at 40: one node left in the pool (max_nodes 2 = the sample),
    # the 8-GPU one, which the estimate packs with both: Ready at 70.
    nodes = [node("big", "V100M16", gpus=8), node("small", "V100M16", gpus=2)]
    pods = [pod("a", 0, 100, None), pod("b", 40, 100, None, num=2), pod("c", 40, 100, None, num=2),
            pod("d", 41, 100, None, num=8)]
    cfg = {"scale_up_delay_s": 30, "scale_down_after_s": 1000, "min_nodes": 0}
    dr, s = scaled(nodes, pods, cfg)
    assert dr.bind[:3] == [30, 70, 70]
    assert dr.bind[3] is None  # d: no node left to ask for
    # provisioned: 2 GPUs 0..40, 10 GPUs 40..100 (the trace's end)
    assert dr.integral["provisioned"] == 2 * 40 + 10 * 60


def test_autoscaler_pool_larger_than_the_sample_and_bad_options():
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler, strategies, data

    nodes = [data.Node("n0", 1000, 1000, 2, "T4", None, {}), data.Node("n1", 1000, 1000, 4, "T4", None, {})]
    cfg = strategies.check_autoscaler({"max_nodes": 5, "min_nodes": 2})
    pool, initial = autoscaler.pool_nodes(nodes, cfg, 1)
    assert [n.name for n in pool] == ["n0", "n1", "n0~2", "n1~2", "n0~3"] and len(initial) == 2
    with pytest.raises(GpuOpsError) as err:
        strategies.check_autoscaler({"scale_up_delay": 10})
    assert "unknown key(s) scale_up_delay; valid: scale_up_delay_s, scale_down_after_s, min_nodes, max_nodes" in err.value.msg
    with pytest.raises(GpuOpsError) as err:
        strategies.check_autoscaler({"min_nodes": 3, "max_nodes": 2})
    assert "must not exceed" in err.value.msg


def test_autoscaler_through_the_runner():
    nodes = [node("n0", "V100M16"), node("n1", "V100M16")]
    pods = [pod("a", 0, 3600, None, num=2), pod("b", 0, 3600, None, num=2)]
    out = runner.run({"nodes": nodes, "pods": pods, "departures": True, "inflation": 0, "order": "file",
                      "autoscaler": {"scale_up_delay_s": 0, "min_nodes": 0}, "seeds": [1, 2]})
    s = out["summary"]
    # both pods ask at 0; two nodes Ready at once; 4 GPUs for the hour
    assert s["gpu_hours_provisioned"] == 4.0 and s["scale_ups"] == 2 and s["served_pct"] == 100.0


def test_autoscaler_packs_pending_pods_into_the_nodes_already_booting():
    # two 4-GPU nodes, none up. b and c (2 GPUs each) arrive at 0: the estimate packs both on one node, so
    # one node is asked for, not two. At 20 (Ready) both bind there; c ends at 30, and from then on... nothing
    # else: the node empties at 40 and the idle check (1000 s) is past the trace's end.
    nodes = [node("n0", "V100M16", gpus=4), node("n1", "V100M16", gpus=4)]
    pods = [pod("b", 0, 40, None, num=2), pod("c", 0, 30, None, num=2)]
    dr, dummy = scaled(nodes, pods, {"scale_up_delay_s": 20, "scale_down_after_s": 1000})
    assert dr.bind == [20, 20] and dr.asc.scale_ups == 1
    assert dr.integral["provisioned"] == 4 * 40


def test_autoscaler_idle_time_restarts_when_a_pod_comes_and_goes():
    # one 1-GPU node up (min_nodes 0, max 1): a CPU pod z runs 0..1, the node is empty from 1, a binds at 5 and
    # leaves at 8; the idle check due at 11 (from 1) must not remove it; the one due at 18 (from 8) does. b at
    # 30 asks for it again (Ready 40).
    nodes = [node("n0", "V100M16", gpus=1)]
    pods = [pod("z", 0, 1, None, num=0, milli=0), pod("a", 5, 8, None), pod("b", 30, 50, None)]
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import autoscaler

    cfg = {"scale_up_delay_s": 10, "scale_down_after_s": 10, "min_nodes": 0, "max_nodes": 1}
    dr, dummy = scaled(nodes, pods, dict(cfg, min_nodes=1))
    assert dr.bind == [0, 5, 30] and dr.asc.scale_downs == 0  # min_nodes 1: never removed
    # min_nodes 0 but the node starts up: pool_nodes puts min_nodes up; start with it up by hand
    original = autoscaler.pool_nodes
    autoscaler.pool_nodes = lambda n, c, s: (list(n), [0])
    try:
        dr, dummy = scaled(nodes, pods, cfg)
    finally:
        autoscaler.pool_nodes = original
    assert dr.bind == [0, 5, 40] and (dr.asc.scale_downs, dr.asc.scale_ups) == (1, 1)
    # provisioned: 1 GPU 0..18, none 18..30, 1 GPU 30..50
    assert dr.integral["provisioned"] == 18 + 20


# ---------------------------------------------------------------------- planned by concurrent demand, hindsight

def test_time_weighted_percentile_of_a_hand_demand_curve():
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import baselines

    # count 2 for 10 s, 3 for 5 s, 1 for 5 s (window 0..20)
    seg = {2: 10.0, 3: 5.0, 1: 5.0}
    assert [baselines.time_percentile(seg, q) for q in (25, 50, 75, 76, 95, 100)] == [1, 2, 2, 3, 3, 3]
    # the same curve from pods: [0,10) [0,10) [5,20) -> 2 on 0..5, 3 on 5..10, 1 on 10..20
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data

    seq = [data.Pod(n, 0, 0, 1, 1000, (), a, None, b) for n, a, b in (("a", 0, 10), ("b", 0, 10), ("c", 5, 20))]
    segs = baselines.concurrent_segments(seq, 20.0, lambda p: "x")
    assert segs == {"x": {2: 5.0, 3: 5.0, 1: 10.0}}


SHARE = [pod("l1", 0, 100, None, milli=300), pod("l2", 0, 100, None, milli=300),
         pod("s1", 0, 10, None, milli=300), pod("s2", 0, 10, None, milli=300)]


def planned_run(sharing, **kw):
    # one node of 2 T4s, shaped like an A100 80GB: a 300-milli pod asks for a 3g.40gb (1g and 2g are too small)
    out = runner.run({"nodes": [node("n0", "T4")], "pods": SHARE, "departures": True, "inflation": 0,
                      "order": "file", "scoring": "best-fit", "sharing": sharing, **kw})
    return out["summary"]


def test_planned_by_percentile_sizes_the_layout_by_concurrent_demand():
    # 3g demand: 4 pods for 10 s, 2 for 90 s of the 100 s window. p50 -> 2 slices (one GPU 3g+3g, the other
    # whole): s1, s2 find no 3g, wait, and are deleted at 10 -> served 2 x 100 / (2 x 100 + 2 x 10)
    s = planned_run("planned", planned_percentile=50)
    assert s["planned_for"]["demand"] == {"3g.40gb": 2}
    assert s["pods_never_placed"] == 2 and s["served_pct"] == round(100.0 * 200 / 220, 3)
    # p95 -> 4 slices (both GPUs 3g+3g): everything served
    s = planned_run("planned")
    assert s["planned_for"] == {"percentile": 95.0, "demand": {"3g.40gb": 4}}
    assert s["pods_never_placed"] == 0 and s["served_pct"] == 100.0
    # hindsight: the peak, 4
    s = planned_run("hindsight")
    assert s["planned_for"] == {"percentile": 100.0, "demand": {"3g.40gb": 4}} and s["served_pct"] == 100.0


def test_planned_percentile_and_hindsight_options_checked():
    with pytest.raises(GpuOpsError) as err:
        planned_run("planned", planned_percentile=0)
    assert "planned_percentile must be a percentile in (0, 100]" in err.value.msg
    with pytest.raises(GpuOpsError) as err:
        runner.normalise({"nodes": TWO, "pods": SHARE, "sharing": "hindsight"})
    assert "sharing hindsight needs departures: true" in err.value.msg and "exclusive, fractional, mig, planned" in err.value.msg


# ---------------------------------------------------------------------- node-level re-plans

def node_replay(scope, drain, monkeypatch, pods=None):
    """One node of 2 GPUs, whole GPUs at the start. A (whole GPU) runs on GPU 0 from 0 to 100; B (300 milli:
    a 3g.40gb) arrives at 5 and pends, which re-plans at 5. The planner is replaced by a hand answer: both GPUs
    become 3g.40gb + 3g.40gb (budget 2, reconfigure_s 20)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned

    calls = []

    def hand_plan(self, m, deficit, multi, empty, free, need, budget_left):
        calls.append(1)
        if len(calls) > 1:
            return []
        q = [i for i, k in enumerate(self.table.kinds) if k.profile == "3g.40gb"][0]
        return [(0, 0, [q, q]), (0, 1, [q, q])]

    monkeypatch.setattr(replanned.Replanner, "_plan_model", hand_plan)
    pods = pods or [pod("A", 0, 100, None), pod("B", 5, 200, None, milli=300)]
    p = runner.normalise({"nodes": [node("n0", "T4")], "pods": pods, "departures": True, "inflation": 0,
                          "order": "file", "scoring": ["best-fit"], "sharing": ["replanned"], "replan_budget": 2,
                          "reconfigure_s": 20, "replan_scope": scope, "replan_drain": drain})
    nodes_all, pods_in = runner.load_inputs(p)
    end = departures.check_times(pods_in)
    cluster = whatif_engine.Cluster(nodes_all)
    seq, rng, dummy_a, dummy_r = runner.arrivals_for(pods_in, cluster.total_milli, p, 42)
    eng, rp = timed.build(cluster, nodes_all, pods_in, seq, rng, "best-fit", "replanned", p)
    dr = departures.DepartureReplay(eng, seq, end, rp).run()
    return dr, rp, departures.summarise(dr)


def test_node_scope_requeue_evicts_and_wait_delays(monkeypatch):
    # gpu scope: GPU 0 is busy and skipped, GPU 1 changes at 5 and is back at 25: B binds at 25, A untouched
    dr, rp, s = node_replay("gpu", "requeue", monkeypatch)
    assert dr.bind == [0, 25] and s["reconfigured_gpus"] == 1 and dr.evicted_run == {}
    # node scope, requeue: A is evicted at 5, both GPUs change at 5 and are back at 25. B (first in the queue)
    # binds at 25; A wants a whole GPU, finds only 3g slices and is deleted pending at 100: it ran 5 of 100 s
    dr, rp, s = node_replay("node", "requeue", monkeypatch)
    assert dr.bind == [0, 25] and rp.drain_evictions == 1 and s["reconfigured_gpus"] == 2
    assert dr.evicted_run == {0: 5.0} and s["pods_deleted_pending"] == 1
    assert s["served_pct"] == round(100.0 * (5 * 1.0 + 175 * 0.3) / (100 * 1.0 + 195 * 0.3), 3)
    # node scope, wait: the node's GPUs are cordoned at 5; A runs to 100, then both change (back at 120), B
    # binds at 120; nobody is evicted, the change waited 95 s
    dr, rp, s = node_replay("node", "wait", monkeypatch)
    assert dr.bind == [0, 120] and rp.drain_evictions == 0 and rp.drain_wait_s == 95.0
    assert s["reconfigured_gpus"] == 2 and dr.evicted_run == {}


def test_replan_scope_and_drain_options_checked():
    for key, bad, valid in (("replan_scope", "rack", "gpu, node"), ("replan_drain", "kill", "requeue, wait")):
        with pytest.raises(GpuOpsError) as err:
            runner.normalise({"nodes": TWO, "pods": SHARE, "departures": True, key: bad})
        assert "%s must be one of %s, not 'kill'" % (key, valid) in err.value.msg or bad in err.value.msg
        assert valid in err.value.msg


def test_node_scope_wait_cordons_and_waits_for_every_changing_gpu(monkeypatch):
    # A on GPU 0 (0..100), C on GPU 1 (0..50); B (3g) pends at 5 -> the node's change waits, both GPUs cordoned.
    # D (whole GPU) at 10 finds no unit (GPU 1 is cordoned once C left at 50); at 100 both GPUs change, back at
    # 120: B binds; D wants a whole GPU, there is none, it is deleted pending at 300
    pods = [pod("A", 0, 100, None), pod("C", 0, 50, None), pod("B", 5, 200, None, milli=300),
            pod("D", 10, 300, None)]
    dr, rp, s = node_replay("node", "wait", monkeypatch, pods)
    assert dr.bind == [0, 0, 120, None] and rp.drain_wait_s == 95.0 and s["pods_deleted_pending"] == 1
    # GPU 1 is empty when the change is decided: it is cordoned at once, so D (whole GPU, at 10) does not take it
    pods = [pod("A", 0, 100, None), pod("B", 5, 200, None, milli=300), pod("D", 10, 300, None)]
    dr, rp, s = node_replay("node", "wait", monkeypatch, pods)
    assert dr.bind == [0, 120, None] and rp.drain_wait_s == 95.0


def test_capacity_search_with_priorities_preempts():
    # a (lo) 0..1000 and b (hi) 10..2000, target: p95 start delay 0 s. Without priorities one GPU makes b wait
    # 990 s (p95 of 0 and 990 > 0): two GPUs. With them b preempts a at 10 and starts at once; a started at 0
    # (and is deleted pending at 1000): one GPU is enough
    pods = [pod("a", 0, 1000, "lo"), pod("b", 10, 2000, "hi")]
    base = {"nodes": [node("n%d" % i, "V100M16", gpus=1) for i in range(4)], "pods": pods, "departures": True,
            "inflation": 0, "order": "file", "scoring": "best-fit", "capacity_search": {"start_delay_p95_s": 0}}
    assert runner.run(dict(base))["runs"][0]["capacity"]["gpus"] == 2
    assert runner.run(dict(base, priorities=PRIO))["runs"][0]["capacity"]["gpus"] == 1
    with pytest.raises(GpuOpsError) as err:
        runner.run(dict(base, autoscaler={"max_nodes": 3}))
    assert "autoscaler.max_nodes and capacity_search do not go together" in err.value.msg


def test_capacity_search_with_the_autoscaler_sizes_the_pool():
    # two whole-GPU pods 0..1000 s and one 5000..6000 s, target served 100 %, nodes of 1 GPU, none up at the
    # start, Ready 0 s after the ask, removed 100 s idle: a pool of 2 serves everything. Provisioned: 2 GPUs
    # 0..1000 (+ 100 s idle each), then 1 GPU 5000..6000 (the trace ends at 6000): 2 x 1100 + 1000 GPU-s
    pods = [pod("a", 0, 1000, None), pod("b", 0, 1000, None), pod("c", 5000, 6000, None)]
    out = runner.run({"nodes": [node("n%d" % i, "V100M16", gpus=1) for i in range(4)], "pods": pods,
                      "departures": True, "inflation": 0, "order": "file", "scoring": "best-fit",
                      "capacity_search": {"served_pct": 100},
                      "autoscaler": {"scale_up_delay_s": 0, "scale_down_after_s": 100, "min_nodes": 0}})
    cap = out["runs"][0]["capacity"]
    assert cap["gpus"] == 2 and cap["met"] is True
    assert cap["gpu_hours_provisioned"] == round((2 * 1100 + 1000) / 3600.0, 2)


def test_planned_leaves_the_nodes_the_plan_does_not_use_whole():
    # the same demand on two nodes: the plan lays out one GPU (p50: two 3g slices) and names the other node
    # with no config; that node keeps whole GPUs (s1, s2 still find no 3g slice)
    out = runner.run({"nodes": [node("n0", "T4"), node("n1", "T4")], "pods": SHARE, "departures": True,
                      "inflation": 0, "order": "file", "scoring": "best-fit", "sharing": "planned",
                      "planned_percentile": 50})
    s = out["summary"]
    assert s["planned_for"]["demand"] == {"3g.40gb": 2} and s["served_pct"] == round(100.0 * 200 / 220, 3)
