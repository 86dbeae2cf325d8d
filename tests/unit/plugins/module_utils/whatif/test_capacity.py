# -*- coding: utf-8 -*-
"""Window, load factor, nested samples, capacity search, utilisation and paired intervals: hand-worked traces."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import capacity, load, report, runner, stats
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Node, Pod


def node(name, gpus=1, model="V100M16"):
    return {"name": name, "gpus": [{"model": model, "count": gpus}], "cpu_milli": 64000, "memory_mib": 262144}


def pod(name, created, deleted=None, num=1, milli=1000):
    out = {"name": name, "cpu_milli": 1000, "memory_mib": 1024, "num_gpu": num, "gpu_milli": milli,
           "creation_time": created}
    if deleted is not None:
        out["deletion_time"] = deleted
    return out


def run(nodes, pods, **kw):
    p = {"nodes": nodes, "pods": pods, "departures": True, "inflation": 0, "order": "file", "scoring": ["best-fit"],
         "sharing": ["exclusive"]}
    p.update(kw)
    return runner.run(p)


def P(name, c, d):
    return Pod(name, 1000, 1024, 1, 1000, (), c, None, d, None)


# ---------------------------------------------------------------- window and load factor
def test_active_window_runs_from_the_first_arrival_to_the_last_deletion():
    # three pods: 1..2 h, 2..4 h, 3..2.5 h... : window 1 h .. 4 h (3 hours), whatever the trace's hour 0
    pods = [pod("a", 3600, 7200), pod("b", 7200, 14400), pod("c", 10800, 12600)]
    s = run([node("n0", 2)], pods)["summary"]
    assert s["trace_hours"] == 3.0
    # GPUs held: a 1 h, b 2 h, c 0.5 h = 3.5 GPU-h over 3 h
    assert s["gpu_hours_held"] == 3.5 and s["held_gpus_mean"] == round(3.5 / 3, 2)
    # provisioned: 2 GPUs x 3 h
    assert s["gpu_hours_provisioned"] == 6.0


def test_active_window_starts_when_the_recording_does():
    # 2 pods of 42 (under 5 %) created before the first deletion (10 h): they were running when the recording
    # began; the window starts at 10 h and ends at the last deletion (11 h)
    pods = [pod("old", 0, 11 * 3600), pod("first", 9 * 3600, 10 * 3600)]
    pods += [pod("p%02d" % i, 10 * 3600 + 60 * i, 10 * 3600 + 60 * i + 30) for i in range(1, 41)]
    seq = runner.whatif_data.pods_from_list(pods)
    assert load.window_start(seq) == 10 * 3600
    out, end = load.retime(seq, "active", 1.0)
    assert (out[0].creation_time, out[0].deletion_time) == (10 * 3600, 11 * 3600)  # arrives at the start
    assert (out[1].creation_time, out[1].deletion_time) == (10 * 3600, 10 * 3600)  # keeps its deletion
    assert out[2] == seq[2] and end == 11 * 3600
    s = run([node("n0", 4)], pods)["summary"]
    assert s["trace_hours"] == 1.0
    whole = run([node("n0", 4)], pods, window="whole")["summary"]
    assert whole["trace_hours"] == 11.0  # from hour 0
    # one more early pod (3 of 43, 7 %): no recording start, the window starts at the first creation
    seq3 = runner.whatif_data.pods_from_list(pods + [pod("x", 3600, 10 * 3600 + 5)])
    assert load.window_start(seq3) == 0


def test_load_factor_two_halves_inter_arrival_times_and_keeps_lives():
    seq = [P("a", 1000, 1050), P("b", 1100, 1400), P("c", 1300, 2000)]
    out, end = load.retime(seq, "whole", 2.0)
    assert [p.creation_time for p in out] == [1000, 1050, 1150]  # gaps 100, 200 -> 50, 100
    assert [p.deletion_time - p.creation_time for p in out] == [50, 300, 700]
    assert end == 1850
    same, end1 = load.retime(seq, "whole", 1.0)
    assert same == seq and end1 == 2000


# ---------------------------------------------------------------- nested samples
def _nodes():
    out = [Node("a%02d" % i, 64000, 262144, 8, "A", None, {}) for i in range(10)]
    out += [Node("b%02d" % i, 64000, 262144, 2, "B", None, {}) for i in range(10)]
    return out


def test_nested_samples_grow_as_supersets_and_keep_the_model_mix():
    nodes = _nodes()  # 80 GPUs of A, 20 of B: 80 % / 20 %
    prev = set()
    for g in range(5, 101, 5):
        names = set(n.name for n in load.sample_gpus(nodes, g, 7))
        assert prev <= names
        prev = names
        got = load.sample_gpus(nodes, g, 7)
        gpus = sum(n.gpus for n in got)
        assert gpus >= g
        a = sum(n.gpus for n in got if n.model == "A")
        # the mix stays within one node of its share
        assert abs(a - 0.8 * gpus) <= 8
    assert len(load.sample_gpus(nodes, 1000, 7)) == 20
    assert [n.name for n in load.nested_order(nodes, 7)] != [n.name for n in load.nested_order(nodes, 8)]


# ---------------------------------------------------------------- capacity search
def test_bisection_finds_the_smallest_cluster_that_serves_everything():
    # four whole-GPU pods live together 0..1000 s, a fifth 2000..3000 s: 4 GPUs serve 100 %, 3 do not
    pods = [pod("p%d" % i, 0, 1000) for i in range(4)] + [pod("late", 2000, 3000)]
    out = run([node("n%d" % i) for i in range(10)], pods, capacity_search={"served_pct": 100}, seeds=[1, 2])
    cap = out["runs"][0]["capacity"]
    assert cap["gpus"] == 4 and cap["nodes"] == 4 and cap["met"] is True
    assert [c["gpus"] for c in cap["per_seed"]] == [4, 4]
    # requested 4 x 1000 + 1000 GPU-s over 4 GPUs x 3000 s
    assert cap["utilisation_pct"] == round(100.0 * 5000 / 12000, 2)
    assert out["capacity"]["exclusive"]["gpus"] == 4


def test_bisection_below_the_peak():
    # 16 whole-GPU pods live together 0..1000 s; those that do not fit are deleted while pending: k GPUs serve
    # k / 16 of the work, so 50 % needs exactly 8 GPUs (the search gallops down from 16, then bisects 1..9)
    pods = [pod("p%02d" % i, 0, 1000) for i in range(16)]
    out = run([node("n%02d" % i) for i in range(20)], pods, capacity_search={"served_pct": 50})
    cap = out["runs"][0]["capacity"]
    assert cap["gpus"] == 8 and cap["served_pct"] == 50.0 and cap["never_placed_pct"] == 50.0


def test_a_start_delay_target_allows_a_smaller_cluster():
    # two 1-GPU pods at 0 (lives 100 s), served 100 % only with 2 GPUs; with 1 GPU the second waits 100 s:
    # p95 of (0, 100) = 95 s
    pods = [pod("a", 0, 100), pod("b", 0, 200)]
    out = run([node("n%d" % i) for i in range(4)], pods, capacity_search={"start_delay_p95_s": 95})
    assert out["runs"][0]["capacity"]["gpus"] == 1
    out = run([node("n%d" % i) for i in range(4)], pods, capacity_search={"start_delay_p95_s": 94})
    assert out["runs"][0]["capacity"]["gpus"] == 2


def test_a_target_not_met_at_the_largest_size_is_reported_not_raised():
    pods = [pod("a", 0, 1000), pod("b", 0, 1000)]
    out = run([node("n0")], pods, capacity_search={"served_pct": 100})
    cap = out["runs"][0]["capacity"]
    assert cap["met"] is False and cap["gpus"] == 1
    assert cap["served_pct"] == 50.0  # b never ran: 1000 of 2000 GPU-s


def test_utilisation_held_and_node_hours_on_a_hand_example():
    # one node of 2 GPUs, 2 h window: a whole GPU 0..1 h, a half GPU 0..2 h (exclusive: a whole GPU)
    s = run([node("n0", 2)], [pod("a", 0, 3600), pod("b", 0, 7200, milli=500)])["summary"]
    assert s["gpu_hours_provisioned"] == 4.0
    assert s["utilisation_pct"] == 50.0  # (1 + 0.5 x 2) GPU-h of 4
    assert s["held_pct"] == 75.0  # 3 GPU-h held of 4
    assert s["node_hours_held"] == 2.0
    assert s["served_pods_pct"] == 100.0
    bc = s["by_class"]
    assert bc["whole"]["pods"] == 1 and bc["shared"]["pods"] == 1 and bc["long"]["pods"] == 2


def test_by_class_counts_the_pods_a_class_loses():
    # one GPU: a long whole pod 0..2 h holds it, a short shared pod at 60 s is deleted at 600 s while pending
    s = run([node("n0")], [pod("a", 0, 7200), pod("b", 60, 600, milli=300)])["summary"]
    bc = s["by_class"]
    assert bc["shared"]["pods_never_placed"] == 1 and bc["shared"]["served_pct"] == 0.0
    assert bc["short"]["served_pods_pct"] == 0.0 and bc["whole"]["served_pct"] == 100.0
    assert bc["whole"]["start_delay_p95_s"] == 0.0 and bc["shared"]["start_delay_p95_s"] is None
    assert s["served_pods_pct"] == 50.0
    # demand over capacity: (7200 + 0.3 x 540) GPU-s requested of 7200 provisioned
    assert s["utilisation_pct"] == round(100.0 * (7200 + 0.3 * 540) / 7200, 3)


# ---------------------------------------------------------------- statistics
def test_paired_interval_on_a_hand_example():
    ci = stats.mean_ci([1.0, 2.0, 3.0])
    # mean 2, sd 1, t(0.975, 2) = 4.303: 2 +- 4.303 / sqrt(3) = 2 +- 2.4843
    assert ci["mean"] == 2.0 and ci["sd"] == 1.0
    assert ci["ci95"] == [round(2 - 4.303 / 3 ** 0.5, 4), round(2 + 4.303 / 3 ** 0.5, 4)]
    assert stats.verdict(ci) == "none"
    runs = {"base": [{"g": 10}, {"g": 20}, {"g": 30}], "new": [{"g": 8}, {"g": 18}, {"g": 28}]}
    d = stats.paired(runs, "base", ("g",), relative=("g",))["new"]
    assert d["g"]["mean"] == -2.0 and d["g"]["ci95"] == [-2.0, -2.0] and d["g"]["verdict"] == "lower"
    # relative: -20 %, -10 %, -6.67 %
    assert d["g_rel_pct"]["mean"] == round((-20 - 10 - 200.0 / 30) / 3, 4)


def test_paired_differences_of_two_strategies_over_seeds():
    pods = [pod("a", 0, 1000), pod("b", 0, 1000, milli=400), pod("c", 0, 1000, milli=400)]
    out = run([node("n%d" % i) for i in range(4)], pods, sharing=["exclusive", "fractional"], seeds=[1, 2, 3],
              capacity_search={"served_pct": 100}, baseline="exclusive")
    # exclusive needs 3 GPUs, fractional 2 (the two 0.4 shares on one GPU), every seed
    assert out["capacity"]["exclusive"]["gpus"] == 3 and out["capacity"]["fractional"]["gpus"] == 2
    d = out["paired"]["capacity"]["fractional"]["gpus"]
    assert d["mean"] == -1.0 and d["verdict"] == "lower"
    md, pics = report.render(out)
    assert "whatif-capacity.svg" in pics and "GPUs needed" in md


# ---------------------------------------------------------------- option errors
@pytest.mark.parametrize("kw, names", [
    ({"window": "all"}, "active, whole"),
    ({"load_factor": 0}, "(0, 1000]"),
    ({"cluster_gpus": 0}, "positive integer"),
    ({"capacity_search": {"served": 99}}, "served_pct, start_delay_p95_s, never_placed_pct"),
    ({"capacity_search": {"served_pct": 120}}, "0..100"),
    ({"baseline": "mig"}, "exclusive"),
])
def test_invalid_options_name_the_valid_ones(kw, names):
    with pytest.raises(GpuOpsError) as e:
        run([node("n0")], [pod("a", 0, 10)], **kw)
    assert names in e.value.msg


def test_capacity_search_needs_departures():
    with pytest.raises(GpuOpsError, match="departures: true"):
        run([node("n0")], [pod("a", 0, 10)], departures=False, capacity_search={"served_pct": 99})


def test_capacity_check_defaults_to_served_99():
    assert capacity.check({}) == {"served_pct": 99.0}
    assert capacity.check(None) is None


def test_a_replay_stops_once_the_target_is_out_of_reach():
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine, timed

    p = runner.normalise({"nodes": [node("n0")], "pods": [pod("a", 0, 1000), pod("b", 0, 1000), pod("c", 2000, 3000)],
                          "departures": True, "inflation": 0, "order": "file", "scoring": ["best-fit"]})
    nodes, pods = runner.load_inputs(p)
    cluster = engine.Cluster(nodes)
    seq, rng, dummy_a, dummy_r = runner.arrivals_for(pods, cluster.total_milli, p, 42)
    eng, rp = timed.build(cluster, nodes, pods, seq, rng, "best-fit", "exclusive", p)
    # 3000 GPU-s requested, 90 % allows 300 lost; b waits from 0 and is lost for good at 1000
    dr = capacity.BoundedReplay(eng, seq, 3000, {"served_pct": 90}, rp)
    with pytest.raises(capacity.Hopeless):
        dr.run()
    assert dr.last == 1000 and dr.bind[2] is None
    eng2, rp2 = timed.build(cluster, nodes, pods, seq, rng, "best-fit", "exclusive", p)
    dr2 = capacity.BoundedReplay(eng2, seq, 3000, {"served_pct": 60}, rp2).run()  # 1000 lost of 1200 allowed
    assert dr2.bind == [0, None, 2000]
