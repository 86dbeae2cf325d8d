# -*- coding: utf-8 -*-
"""The replay with departures: handmade traces whose answers are worked out by hand."""
import os

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import departures, report, runner, timed
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import engine as whatif_engine

FIX = os.path.join(os.path.dirname(__file__), "fixtures")


def node(name="n0", gpus=1, model="V100M16", cpu=64000, mem=262144):
    return {"name": name, "gpus": [{"model": model, "count": gpus}], "cpu_milli": cpu, "memory_mib": mem}


def pod(name, created, deleted=None, num=1, milli=1000, cpu=1000, mem=1024):
    out = {"name": name, "cpu_milli": cpu, "memory_mib": mem, "num_gpu": num, "gpu_milli": milli, "creation_time": created}
    if deleted is not None:
        out["deletion_time"] = deleted
    return out


def params(nodes, pods, **kw):
    p = {"nodes": nodes, "pods": pods, "departures": True, "inflation": 0, "order": "file", "scoring": ["best-fit"],
         "sharing": ["exclusive"]}
    p.update(kw)
    return p


def replay(nodes, pods, sharing="exclusive", scoring="best-fit", **kw):
    """The finished DepartureReplay of one run (seed 42), with its summary."""
    p = runner.normalise(params(nodes, pods, sharing=[sharing], scoring=[scoring], **kw))
    nodes_all, pods_in = runner.load_inputs(p)
    end = departures.check_times(pods_in)
    cluster = whatif_engine.Cluster(nodes_all)
    seq, rng, dummy_a, dummy_r = runner.arrivals_for(pods_in, cluster.total_milli, p, 42)
    eng, rp = timed.build(cluster, nodes_all, pods_in, seq, rng, scoring, sharing, p)
    dr = departures.DepartureReplay(eng, seq, end, rp).run()
    return dr, departures.summarise(dr)


def test_the_waiting_pod_binds_when_the_first_leaves():
    # one GPU; a holds it 0..100, b arrives at 10 and waits; it binds at 100 and runs to 1000
    dr, s = replay([node()], [pod("a", 0, 100), pod("b", 10, 1000)])
    assert dr.bind == [0, 100]
    assert s["pods_waited"] == 1 and s["pods_never_placed"] == 0
    assert s["pending_waited_median_s"] == 90.0
    # held: one GPU from 0 to 1000; requested 100 + 990 GPU-seconds, served 100 + 900
    assert s["gpu_hours_held"] == round(1000 / 3600.0, 2)
    assert s["served_pct"] == round(100.0 * 1000 / 1090, 3)
    assert s["held_gpus_peak"] == 1


def test_pending_time_median_and_p95():
    # one GPU, three pods created at 0 in this order: waits 0, 100, 200
    dr, s = replay([node()], [pod("a", 0, 100), pod("b", 0, 200), pod("c", 0, 300)])
    assert dr.bind == [0, 100, 200]
    assert s["pending_median_s"] == 100.0
    assert s["pending_p95_s"] == 190.0  # linear interpolation: 100 + 0.9 x 100
    assert s["pending_waited_median_s"] == 150.0
    assert s["pending_waited_p95_s"] == 195.0


def test_fifo_first_waiting_pod_first():
    # b and c both wait for the one GPU; b arrived first and gets it at 50, c at 80 when b leaves
    dr, dummy = replay([node()], [pod("a", 0, 50), pod("b", 5, 80), pod("c", 6, 90)])
    assert dr.bind == [0, 50, 80]


def test_deleted_while_pending_and_pending_at_the_end_never_placed():
    # a never leaves; b is deleted at 40 while waiting; c waits to the end (no deletion time)
    dr, s = replay([node()], [pod("a", 0), pod("b", 10, 40), pod("c", 20), pod("d", 30, 50, num=0, milli=0)])
    assert dr.bind[:3] == [0, None, None]
    assert dr.bind[3] == 30  # a CPU pod still fits
    assert s["pods_never_placed"] == 2
    assert s["pods_deleted_pending"] == 1
    assert dr.end == 50


def test_departure_frees_milli_for_sharing_pods():
    # fractional: two 600-milli pods cannot share a GPU; the second waits until the first leaves at 30
    dr, s = replay([node()], [pod("a", 0, 30, milli=600), pod("b", 1, 100, milli=600), pod("c", 2, 100, milli=400)],
                   sharing="fractional")
    assert dr.bind == [0, 30, 2]
    assert s["gpu_hours_held"] == round(100 / 3600.0, 2)  # the one GPU is held from 0 to 100


def test_fewer_gpus_held_when_sharing():
    pods = [pod("a", 0, 100, milli=500), pod("b", 0, 100, milli=500)]
    dummy, excl = replay([node(gpus=2)], pods, sharing="exclusive")
    dummy, frac = replay([node(gpus=2)], pods, sharing="fractional")
    assert excl["gpu_hours_held"] == round(200 / 3600.0, 2)
    assert frac["gpu_hours_held"] == round(100 / 3600.0, 2)
    assert excl["served_pct"] == frac["served_pct"] == 100.0


def test_unit_model_releases_mig_slices():
    # static mig: one 3g.40gb slice per GPU... two 3g slices on the GPU: a third 3g pod waits for a departure
    pods = [pod("a", 0, 60, milli=400), pod("b", 0, 100, milli=400), pod("c", 1, 100, milli=400)]
    dr, dummy = replay([node()], pods, sharing="mig", mig_config={"*": {"3g.40gb": 2}})
    assert dr.bind == [0, 0, 60]


def test_run_returns_the_departure_summary_and_timeline():
    out = runner.run(params([node(), node("n1")], [pod("a", 0, 3600), pod("b", 0, 7200, milli=500)],
                            sharing=["exclusive", "fractional"], seeds=[1, 2]))
    assert out["departures"] is True
    assert [r["sharing"] for r in out["runs"]] == ["exclusive", "fractional"]
    s = out["runs"][0]["summary"]
    assert s["gpu_hours_held"] == 3.0 and s["served_pct"] == 100.0
    assert s["spread"]["gpu_hours_held"]["stdev"] == 0.0
    assert out["curve"][0] == {"hour": 0.0, "held_gpus": 2, "allocated_gpus": 2.0, "pending_pods": 0,
                               "running_pods": 2, "reconfiguring_gpus": 0, "reconfigured_gpus": 0,
                               "provisioned_gpus": 2}  # the static cluster: all its GPUs
    assert out["workload"]["trace_end_hours"] == 2.0


def test_the_openb_fixture_replays_with_departures():
    p = {"nodes_csv": os.path.join(FIX, "openb_nodes_sample.csv"), "pods_csv": os.path.join(FIX, "openb_pods_sample.csv"),
         "departures": True, "sharing": ["exclusive", "fractional"], "scoring": ["kube-default"]}
    pods = runner.load_inputs(runner.normalise(p))[1]
    assert all(x.creation_time is not None and x.deletion_time is not None for x in pods)
    out = runner.run(p)
    excl, frac = out["runs"][0]["summary"], out["runs"][1]["summary"]
    assert frac["gpu_hours_allocated"] <= excl["gpu_hours_allocated"]
    assert 0 < excl["served_pct"] <= 100


def test_report_renders_the_departure_table():
    out = runner.run(params([node()], [pod("a", 0, 3600), pod("b", 10, 7200)], sharing=["exclusive", "fractional"]))
    markdown, pictures = report.render(out)
    assert "GPU-h held" in markdown and "never placed" in markdown
    assert sorted(pictures) == ["whatif-held.svg", "whatif-pending.svg", "whatif-reconfigured.svg"]


@pytest.mark.parametrize("kw, message", [
    ({"departures": "yes"}, "departures must be true or false"),
    ({"replan_every_h": 0}, r"replan_every_h must be a number > 0"),
    ({"replan_every_h": "often"}, r"replan_every_h must be a number > 0"),
    ({"replan_min_interval_h": -1}, r"replan_min_interval_h must be a number >= 0"),
    ({"reconfigure_s": -5}, r"reconfigure_s must be a number >= 0"),
    ({"replan_budget": -1}, r"replan_budget must be a number of GPUs >= 0 .* in \(0, 100\]"),
    ({"replan_budget": "150%"}, r"replan_budget must be a number of GPUs >= 0"),
    ({"replan_budget": "some"}, r"replan_budget must be a number of GPUs >= 0"),
    ({"sharing": ["replanned"], "departures": False}, "sharing replanned needs departures: true.*exclusive, fractional, "
                                                      "mig, planned"),
])
def test_option_errors_name_the_valid_values(kw, message):
    with pytest.raises(GpuOpsError, match=message):
        runner.normalise(params([node()], [pod("a", 0, 10)], **kw))


def test_a_pod_without_creation_time_is_refused():
    pods = [pod("a", 0, 10), {"name": "b", "cpu_milli": 1, "memory_mib": 1, "num_gpu": 1, "gpu_milli": 1000}]
    with pytest.raises(GpuOpsError, match=r"creation_time on every pod; pod 1 \(b\) has none"):
        runner.run(params([node()], pods))


def test_deletion_before_creation_is_refused():
    with pytest.raises(GpuOpsError, match="deletion_time.*before the creation_time"):
        runner.run(params([node()], [pod("a", 100, 10)]))


def test_defaults_keep_the_fgd_protocol():
    p = runner.normalise(params([node()], [pod("a", 0, 10)], departures=None))
    assert p["departures"] is False
    out = runner.run(dict(params([node()], [pod("a", 0, 10)]), departures=False))
    assert "departures" not in out and "allocated_pct_at_100" in out["summary"]
