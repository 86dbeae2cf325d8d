# -*- coding: utf-8 -*-
"""sharing replanned: re-plans of the MIG layouts during the replay with departures, on handmade traces."""
import os
import sys

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned, runner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_departures import node, pod, replay  # noqa: E402

ALL_1G = {"*": {"1g.10gb": 7}}


def units(dr, n=0, gi=0):
    eng = dr.e
    return sorted(eng.table.kinds[u].profile for u in eng.gpu_units(n, gi))


def test_a_7x1g_gpu_becomes_3g_slices_when_3g_pods_pend():
    # one GPU laid out 7 x 1g.10gb; a 400-milli pod asks for 3g.40gb (3/7 compute, 4/8 memory): it pends at 0,
    # the re-plan at 0 reconfigures the empty GPU, which is back after reconfigure_s = 120 with 3g slices
    dr, s = replay([node()], [pod("a", 0, 10000, milli=400)], sharing="replanned", mig_config=ALL_1G, reconfigure_s=120)
    assert dr.bind == [120]
    assert "3g.40gb" in units(dr) and "1g.10gb" not in units(dr)
    assert s["reconfigured_gpus"] == 1 and s["replans"] >= 1
    assert s["pending_waited_median_s"] == 120.0
    assert s["gpu_hours_reconfiguring"] == round(120 / 3600.0, 2)
    # while it is reconfigured the GPU counts as held: held from 0 to the end (10000 s)
    assert s["gpu_hours_held"] == round(10000 / 3600.0, 2)


def test_reconfigure_s_zero_binds_at_once():
    dr, s = replay([node()], [pod("a", 0, 100, milli=400)], sharing="replanned", mig_config=ALL_1G, reconfigure_s=0)
    assert dr.bind == [0]
    assert s["reconfigured_gpus"] == 1


def test_a_whole_gpu_pod_gets_mig_disabled():
    dr, dummy = replay([node()], [pod("a", 0, 1000, milli=1000)], sharing="replanned", mig_config=ALL_1G)
    assert dr.bind == [120]
    assert units(dr) == ["gpu"]


def test_a_busy_gpu_is_never_reconfigured():
    # the GPU runs a 1g pod from 0 to the end; the 3g pod never gets a slice, the 1g pod is never evicted
    dr, s = replay([node()], [pod("small", 0, None, milli=100), pod("big", 10, 50000, milli=400)],
                   sharing="replanned", mig_config=ALL_1G, replan_every_h=1)
    assert dr.bind == [0, None]
    assert s["reconfigured_gpus"] == 0 and s["replans"] >= 10
    assert 0 in dr.where  # still running
    assert units(dr).count("1g.10gb") == 6  # six free 1g units: the layout is unchanged
    assert s["planner_calls"] == 0 and s["planner_seconds"] == 0.0  # no empty GPU: the planner is never asked


def test_budget_one_gpu_per_replan():
    # four 1-GPU nodes laid out 7 x 1g; four 4g pods (one 4g.40gb per GPU) pend at 0. A budget of 1 GPU per
    # re-plan, at most one re-plan an hour while pods pend: the GPUs come back at 120, 3720, 7320, 10920 s
    nodes = [node("n%d" % i) for i in range(4)]
    pods = [pod("p%d" % i, 0, 100000, milli=500) for i in range(4)]
    dr, s = replay(nodes, pods, sharing="replanned", mig_config=ALL_1G, replan_budget=1, replan_min_interval_h=1,
                   replan_every_h=24)
    assert sorted(dr.bind) == [120, 3720, 7320, 10920]
    assert s["reconfigured_gpus"] == 4
    assert all(n == 1 for dummy, n in dr.rp.log)


def test_budget_as_a_percentage_and_zero():
    nodes = [node("n%d" % i) for i in range(4)]
    pods = [pod("p%d" % i, 0, 20000, milli=500) for i in range(4)]
    dr, s = replay(nodes, pods, sharing="replanned", mig_config=ALL_1G, replan_budget="50%", replan_min_interval_h=1)
    assert sorted(dr.bind) == [120, 120, 3720, 3720]
    dr, s = replay(nodes, pods, sharing="replanned", mig_config=ALL_1G, replan_budget=0)
    assert dr.bind == [None] * 4 and s["reconfigured_gpus"] == 0


def test_starts_from_whole_gpus_without_a_layout():
    # no plan, no mig_config: MIG disabled everywhere; two 1g pods pend, one re-plan slices one GPU
    dr, s = replay([node(gpus=2)], [pod("a", 0, 1000, milli=100), pod("b", 0, 1000, milli=100)],
                   sharing="replanned", reconfigure_s=60)
    assert dr.bind == [60, 60]
    assert s["reconfigured_gpus"] == 1


def test_periodic_replan_follows_the_window_demand():
    # pods that fit at once still count as demand of the window (a forecast: the next window brings as many).
    # Two whole GPUs; ten 1g pods arrive every 30 min from 0 to 4.5 h, 10 min each, then a burst of eight at 7 h.
    # 0 h: a0 pends; demand = a0 pending + a0 in the window = 2 x 1g -> GPU 0 gets a layout for them, bound at 60 s.
    # a1..a9 fit GPU 0's free slices at once (one runs at a time).
    # 6 h (the periodic re-plan): nothing pends, but the window (0, 6 h] holds a1..a9 = 9 x 1g and only GPU 0's
    # 2 slices are free: a deficit, so GPU 1 is laid out too (ready at 6 h + 60 s). Without the forecast nothing
    # pends and nothing changes until 12 h. The planner gets both (empty) GPUs and the 9 slices: GPU 0 keeps its
    # 2 (the budget, 5 % of 2 GPUs = 1, lets one GPU change), so GPU 1 gets 9 - 2 = 7 (its 7 x 1g maximum). Asking
    # the planner for 9 - 2 free = 7 while it also keeps GPU 0's 2 would lay out only 5 (2 + 5 = 7 < 9).
    # 7 h: the burst of eight binds at once on the 2 + 7 = 9 slices of both GPUs.
    pods = [pod("a%d" % i, 1800 * i, 1800 * i + 600, milli=100) for i in range(10)] + \
        [pod("b%d" % i, 7 * 3600, 8 * 3600, milli=100) for i in range(8)]
    dr, s = replay([node(gpus=2)], pods, sharing="replanned", replan_every_h=6, replan_min_interval_h=6,
                   reconfigure_s=60)
    assert dr.bind[:10] == [60] + [1800 * i for i in range(1, 10)]
    assert dr.rp.log == [(0.0, 1), (6 * 3600.0, 1)]  # one GPU laid out at 0, the other by the 6 h forecast
    assert units(dr, 0, 0) == ["1g.10gb"] * 2  # the layout for the 2 units of demand at 0
    assert units(dr, 0, 1) == ["1g.10gb"] * 7
    assert dr.bind[10:] == [7 * 3600] * 8
    assert s["reconfigured_gpus"] == 2


def test_units_a_replan_takes_away_leave_the_free_count_of_the_next_group():
    # n0: a V100M16 laid out 7 x 1g; n1: a V100M32 with MIG disabled (one whole GPU unit); budget 2 GPUs.
    # y (any model, 1g) ran 0..10 s: demand of the window. x1, x2 (V100M16 only, 3g) pend at 20 s: the re-plan
    # at 20 s sees two groups, {V100M16}: 2 x 3g (first: the larger) and {any}: 1 x 1g.
    # {V100M16}: no 3g free -> n0 becomes 3g + 3g (its 7 x 1g are gone). {any}: 1g wanted, and no 1g is left
    # anywhere (n0's are gone, n1 is a whole GPU) -> n1 is laid out with a 1g: 2 GPUs change in that re-plan.
    # Still counting n0's old 7 x 1g as free would see no deficit for {any} and change only n0.
    pods = [pod("y", 0, 10, milli=100), dict(pod("x1", 20, 5000, milli=400), gpu_spec="V100M16"),
            dict(pod("x2", 20, 5000, milli=400), gpu_spec="V100M16")]
    dr, s = replay([node("n0", model="V100M16"), node("n1", model="V100M32")], pods, sharing="replanned",
                   mig_config={"V100M16": {"1g.10gb": 7}}, replan_budget=2, reconfigure_s=60)
    assert dr.bind == [0, 80, 80]
    assert dr.rp.log == [(20.0, 2)] and s["reconfigured_gpus"] == 2
    assert units(dr, 0, 0) == ["3g.40gb"] * 2 and units(dr, 1, 0) == ["1g.10gb"]


def test_units_being_installed_count_as_free():
    # two GPUs 7 x 1g, reconfigure_s 1000; a 3g pod pends at 0: the re-plan at 0 reconfigures GPU 0 for it (in
    # flight until 1000). The periodic re-plans every 0.05 h (180 s) before that see the pod still pending, and
    # GPU 0's coming 3g units cover it: GPU 1 is never changed.
    dr, s = replay([node(gpus=2)], [pod("a", 0, 5000, milli=400)], sharing="replanned", mig_config=ALL_1G,
                   reconfigure_s=1000, replan_every_h=0.05)
    assert dr.bind == [1000] and dr.rp.log == [(0.0, 1)] and s["reconfigured_gpus"] == 1
    assert units(dr, 0, 1) == ["1g.10gb"] * 7 and s["replans"] > 5


def test_a_group_without_deficit_does_not_stop_the_next_groups():
    # n0 V100M16, n1 V100M32, both 7 x 1g. y0..y2 (any model, 1g) ran 0..10 s; x (V100M16 only, 3g) pends at 20.
    # The re-plan at 20: {any} wants 3 x 1g (the window), 14 are free: nothing to do; {V100M16} wants a 3g:
    # n0 is reconfigured, x binds at 20 + 120 s.
    pods = [pod("y%d" % i, 0, 10, milli=100) for i in range(3)] + [dict(pod("x", 20, 5000, milli=400),
                                                                        gpu_spec="V100M16")]
    dr, s = replay([node("n0", model="V100M16"), node("n1", model="V100M32")], pods, sharing="replanned",
                   mig_config=ALL_1G)
    assert dr.bind == [0, 0, 0, 140] and dr.rp.log == [(20.0, 1)]
    assert s["planner_calls"] == 1  # {V100M16} only
    assert s["replans"] == 1  # the pending x at 20 s; the next periodic one (6 h) is after the trace's end


def test_pods_without_gpus_or_without_a_model_are_skipped_not_the_rest():
    # a pod pending for CPU only (no GPU) and a pod whose gpu_spec names no model of the cluster pend before a 3g
    # pod: the re-plan at 10 s skips them and re-plans for the 3g pod, which binds at 10 + 120 s.
    cpu_only = [pod("c", 0, 10000, num=0, milli=0, cpu=1500), pod("d", 5, 10000, num=0, milli=0, cpu=1000),
                pod("g", 10, 5000, milli=400, cpu=100)]
    dr, dummy = replay([node(cpu=2000)], cpu_only, sharing="replanned", mig_config=ALL_1G, replan_min_interval_h=0)
    assert dr.bind == [0, None, 130] and dr.rp.log == [(10.0, 1)]
    no_model = [dict(pod("t", 0, 10000, milli=400), gpu_spec="T4"), pod("g", 10, 5000, milli=400)]
    dr, dummy = replay([node()], no_model, sharing="replanned", mig_config=ALL_1G, replan_min_interval_h=0)
    assert dr.bind == [None, 130] and dr.rp.log == [(10.0, 1)]


@pytest.mark.parametrize("value, total, gpus", [(3, 100, 3), ("5%", 6212, 310), ("0.01%", 100, 1), ("7", 10, 7),
                                                (0, 10, 0), (2.0, 10, 2), (0.0, 10, 0), ("100%", 7, 7)])
def test_budget_forms(value, total, gpus):
    assert replanned.budget_gpus(value, total) == gpus


@pytest.mark.parametrize("value", [-1, "0%", "101%", "x%", "lots", True, 2.5, None])
def test_bad_budget_names_the_valid_forms(value):
    with pytest.raises(GpuOpsError, match=r"replan_budget must be a number of GPUs >= 0 \(e.g. 300\) or a percentage "
                                          r"of the cluster's GPUs in \(0, 100\]"):
        replanned.budget_gpus(value, 10)


def test_replanned_is_a_sharing_mode():
    assert "replanned" in runner.SHARINGS
    out = runner.run({"nodes": [node()], "pods": [pod("a", 0, 3600, milli=400)], "departures": True, "inflation": 0,
                      "sharing": ["planned", "replanned"], "scoring": ["kube-default"],
                      "plan": {"mig_parted_config": {"version": "v1", "mig-configs": {
                          "c": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}},
                          "node_configs": [{"node": "n0", "mig_config": "c"}]}})
    planned, re = out["runs"][0]["summary"], out["runs"][1]["summary"]
    assert planned["pods_never_placed"] == 1  # 7 x 1g has no slice for a 400-milli pod
    assert re["pods_never_placed"] == 0 and re["reconfigured_gpus"] == 1  # re-planned from the same plan


def test_a_planner_refusal_keeps_its_details_and_cause(monkeypatch):
    def refuse(request):
        assert request.options.objective == "min_gpus" and request.options.solver == "heuristic"
        raise GpuOpsError("no way", models_without_price=["a100_80gb"])

    monkeypatch.setattr(replanned.solver, "plan", refuse)
    with pytest.raises(GpuOpsError, match=r"replanned: the planner refused the re-plan of .* GPUs: no way") as err:
        replay([node()], [pod("a", 0, 100, milli=400)], sharing="replanned", mig_config=ALL_1G, reconfigure_s=0)
    assert err.value.details == {"models_without_price": ["a100_80gb"]}
    assert isinstance(err.value.__cause__, GpuOpsError) and err.value.__cause__.msg == "no way"


def test_imports_without_numpy():
    # controller side without numpy: the module still imports (np None); engine.need_numpy says what is missing
    import subprocess
    code = ("import sys; sys.modules['numpy'] = None; "
            "from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import replanned; print(replanned.np)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert out.returncode == 0 and out.stdout.strip() == "None", out.stderr[-2000:]


def test_a_gpu_pod_without_a_memory_request_counts_in_the_window():
    # Kubernetes pods may request no memory (memory_mib 0). a (1g) pends at 0 on a whole GPU: the re-plan's demand
    # is a pending + a in the window = 2 x 1g, so the GPU gets 2 x 1g (ready at 60 s); b (1g) arrives at 100 and
    # binds at once on the second slice. Leaving a out of the window would lay out one slice and b would wait
    # past its deletion (the next re-plan is 6 h later).
    dr, dummy = replay([node()], [pod("a", 0, 1000, milli=100, mem=0), pod("b", 100, 1000, milli=100, mem=0)],
                       sharing="replanned", reconfigure_s=60, replan_min_interval_h=6)
    assert dr.bind == [60, 100] and units(dr) == ["1g.10gb"] * 2


def _bare_replanner():
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import mig as whatif_mig
    table = whatif_mig.UnitTable()
    shape = whatif_mig.shape_of(None)  # the default mig_shape: A100 80GB
    return replanned.Replanner(None, None, table, [shape], 6, 0.5, 1, 120), table, shape


def test_layout_of_a_gpus_units():
    dummy, table, shape = _bare_replanner()
    one_g = table.kind(shape, [p for p in shape.profiles if p.name == "1g.10gb"][0])
    assert replanned.layout_of([replanned.WHOLE], table) == "all-disabled"
    assert replanned.layout_of([one_g, one_g], table) == {"1g.10gb": 2}
    assert replanned.layout_of([], table) is None and replanned.layout_of([replanned.WHOLE, one_g], table) is None


@pytest.mark.parametrize("whole, multi, rows", [
    # whole GPUs wanted, {GPUs per pod: pending pods}: multi-GPU replicas first (as many as the whole GPUs allow),
    # the rest one GPU each
    (4, {2: 1}, [("whole-2", 1, 2), ("whole-1", 2, 1)]),
    (5, {2: 3}, [("whole-2", 2, 2), ("whole-1", 1, 1)]),
    (7, {3: 2}, [("whole-3", 2, 3), ("whole-1", 1, 1)]),
    (2, {4: 1}, [("whole-1", 2, 1)]),
    (6, {2: 1, 3: 1}, [("whole-2", 1, 2), ("whole-3", 1, 3), ("whole-1", 1, 1)]),
])
def test_planner_items_for_whole_gpus(whole, multi, rows):
    rp, table, shape = _bare_replanner()
    items = rp._items(0, {replanned.WHOLE: whole}, multi)
    assert [(i.name, i.replicas, i.gpus_per_replica) for i in items] == rows
    assert all(i.kind == "training" and i.isolation == "strict" and i.compute is None for i in items)
    assert [i.index for i in items] == list(range(len(rows)))


def test_planner_items_for_slices_name_the_profile():
    rp, table, shape = _bare_replanner()
    three_g = [p for p in shape.profiles if p.name == "3g.40gb"][0]
    q = table.kind(shape, three_g)
    item, = rp._items(0, {q: 2}, {})
    assert (item.name, item.replicas, item.kind, item.gpus_per_replica) == ("mig-3g-40gb", 2, "inference", 1)
    assert item.compute == pytest.approx(3 / 7.0) and item.memory_gb == 40.0  # 3 of 7 compute slices; 40 GB


def test_the_demand_of_a_pending_multi_gpu_pod():
    # a pod of 2 whole GPUs on a node of 1 GPU never binds (budget 0: no re-plan changes anything); nor does a
    # 1-GPU pod (the GPU is 7 x 1g). The demand counts each pod pending and again in the window (the forecast):
    # whole GPUs 2 x 2 + 2 x 1 = 6; the 2-GPU pod twice among the multi-GPU pods, the 1-GPU pod never.
    dr, dummy = replay([node()], [pod("m", 0, None, num=2, milli=1000), pod("s", 0, None, num=1, milli=1000)],
                       sharing="replanned", mig_config=ALL_1G, replan_budget=0)
    assert dr.bind == [None, None]
    groups = dr.rp._demand(1.0)
    assert list(groups.values()) == [{"kinds": {replanned.WHOLE: 6}, "multi": {2: 2}}]
    # 6 h later the window (0, 6 h] no longer holds the arrivals at 0: the pending pods only
    groups = dr.rp._demand(6 * 3600.0)
    assert list(groups.values()) == [{"kinds": {replanned.WHOLE: 3}, "multi": {2: 1}}]
