# -*- coding: utf-8 -*-
"""plan/rightsize.py: peak / p95 / headroom, the profile per model, the history and never-below-peak rules, and the
error paths, through the real Prometheus client against a local http.server that evaluates the PromQL over stored
series of the simulated dcgm-exporter (fake_prometheus.evaluate: quantile_over_time at the asked quantile with
Prometheus' linear interpolation, max/avg/min/sum by over per-device series, range windows)."""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "metrics"))
from fake_prometheus import FakePrometheus, evaluate, series_answer  # noqa: E402

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import prometheus as prom  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import rightsize  # noqa: E402

NOW = 1_000_000.0
GIB = 1024.0


def stored_series(series, missing=()):
    """Prometheus series of the simulated dcgm-exporter for ``series`` = ``[{namespace, pod, gpu?, profile?, model?,
    mem: [MiB...], compute: [0-1...], first: ts}]`` (one entry per device; samples 60 s apart from ``first``):
    DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_GR_ENGINE_ACTIVE and DCGM_FI_DEV_GPU_UTIL (0-100, always 0 on MIG devices),
    less the metrics named in ``missing``."""
    out = []
    for s in series:
        labels = ({"exported_namespace": s["namespace"], "exported_pod": s["pod"], "namespace": "gpu-monitoring",
                   "pod": "dcgm-exporter-x"} if s.get("scraped") else {"namespace": s["namespace"], "pod": s["pod"]})
        labels.update(gpu=str(s.get("gpu", 0)), Hostname="node-a", modelName=s.get("model", "NVIDIA A100-SXM4-80GB"))
        if s.get("profile"):
            labels["GPU_I_PROFILE"] = s["profile"]
        util = [0.0 if s.get("profile") else 100.0 * c for c in s["compute"]]
        for name, vals in (("DCGM_FI_DEV_FB_USED", s["mem"]), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", s["compute"]),
                           ("DCGM_FI_DEV_GPU_UTIL", util)):
            if name not in missing:
                out.append({"labels": dict(labels, __name__=name),
                            "samples": [(s["first"] + 60.0 * i, float(v)) for i, v in enumerate(vals)]})
    return out


def series_vectors(series, missing=()):
    """A fake Prometheus that evaluates gpu_rightsize's PromQL over ``stored_series(series)``."""
    return series_answer(stored_series(series, missing))


def _item(name="embedder", memory_gb=40, **kw):
    return dict({"tenant": "search", "name": name, "replicas": 4, "memory_gb": memory_gb, "kind": "inference",
                 "isolation": "strict"}, **kw)


def _plan(model, profile, name="embedder"):
    return {"plan": {"decisions": [{"tenant": "search", "name": name, "mode": "mig", "model": model,
                                    "resource": "nvidia.com/mig-%s" % profile}]}}


def _pods(mem_gb, n=3, first=NOW - 48 * 3600, profile="3g.40gb", compute=0.3, name="embedder"):
    mem = [v * GIB for v in mem_gb]
    return [{"namespace": "search", "pod": "%s-7d9c5b6f4-%s" % (name, s), "profile": profile, "mem": mem,
             "compute": [compute] * len(mem), "first": first} for s in ("x2b4k", "q9z7m", "vw8tn")[:n]]


@pytest.fixture
def fake():
    f = FakePrometheus()
    yield f
    f.stop()


def run(fake, series, demand, missing=(), **params):
    fake.vectors = series_vectors(series, missing)
    client = prom.Prometheus(fake.url, timeout_s=5)
    return rightsize.rightsize(client, dict({"demand": demand, "window": "7d", "min_history": "24h"}, **params),
                               now=NOW)


def test_3g40gb_at_9gb_peaks_becomes_1g10gb_on_a100_80gb(fake):
    mem = [7.0] * 90 + [8.0] * 8 + [8.5, 9.0]  # p95 8.0 GB, peak 9.0 GB
    out = run(fake, _pods(mem), [_item()], plan=_plan("a100_80gb", "3g.40gb"))
    it = out["items"][0]
    assert it["observed"]["memory_gb_peak"] == 9.0 and it["observed"]["memory_gb_p95"] == 8.0
    assert it["observed"]["samples"] == 300 and it["observed"]["history_h"] == 48.0
    assert it["after"]["memory_gb"] == 9.6 and it["after"]["profile"] == "1g.10gb" and it["changed"] is True
    assert it["reason"].startswith("3g.40gb -> 1g.10gb: p95 8.0 GB, peak 9.0 GB, +20 % headroom = 9.6 GB")
    assert out["demand"][0]["memory_gb"] == 9.6 and out["demand"][0]["replicas"] == 4
    assert out["changes"] == [{"tenant": "search", "name": "embedder", "field": "memory_gb", "before": 40,
                               "after": 9.6, "reason": it["reason"]}]


def test_never_below_the_peak(fake):
    mem = [2.0] * 99 + [15.0]  # p95 2 GB, one 15 GB peak: 2.4 GB would lose the peak
    it = run(fake, _pods(mem), [_item()], plan=_plan("a100_80gb", "3g.40gb"))["items"][0]
    assert it["after"]["memory_gb"] == 15.0 and it["after"]["profile"] == "1g.20gb"


@pytest.mark.parametrize("model,need,profile", [
    ("a30_24gb", 5.5, "1g.6gb"), ("a30_24gb", 9.6, "2g.12gb"), ("a100_40gb", 4.9, "1g.5gb"),
    ("a100_40gb", 9.6, "1g.10gb"), ("a100_40gb", 12.0, "3g.20gb"), ("a100_80gb", 9.6, "1g.10gb"), ("a100_80gb", 19.0, "1g.20gb"),
    ("h100_80gb", 9.6, "1g.10gb"), ("h100_80gb", 30.0, "3g.40gb"), ("h200_141gb", 18.0, "1g.18gb"),
    ("h200_141gb", 40.0, "3g.71gb"), ("b200_180gb", 22.0, "1g.23gb"), ("b200_180gb", 40.0, "1g.45gb"), ("b200_180gb", 60.0, "3g.90gb"),
])
def test_profile_choice_per_model(fake, model, need, profile):
    peak = need / 1.2
    it = run(fake, _pods([peak] * 20), [_item(memory_gb=70)], plan=_plan(model, "7g.80gb"))["items"][0]
    assert it["after"]["memory_gb"] == pytest.approx(need, abs=0.1)
    assert it["after"]["profile"] == profile, it["reason"]


def test_model_without_mig_gets_a_time_slice_share(fake):
    it = run(fake, _pods([10.0] * 20), [_item(isolation="shared")], models=["NVIDIA L40S"])["items"][0]
    assert it["model"] == "l40s_48gb" and it["after"]["memory_gb"] == 12.0
    assert it["after"]["profile"] == "25 % of a l40s_48gb (time-slicing)"


def test_headroom_option_and_compute_of_mig_devices(fake):
    # engine active 0.5 on a 3g.40gb slice of an A100 (7 compute slices) is 0.5 * 3/7 of the GPU
    it = run(fake, _pods([8.0] * 20, compute=0.5), [_item(compute=0.5)], plan=_plan("a100_80gb", "3g.40gb"),
             headroom_pct=0)["items"][0]
    assert it["after"]["memory_gb"] == 8.0
    assert it["observed"]["compute_p95"] == pytest.approx(0.5 * 3 / 7, abs=1e-4)
    assert it["after"]["compute"] == 0.22 and it["after"]["profile"] == "2g.20gb"  # 2 of 7 slices hold 0.22


def test_gpu_util_is_zero_on_mig_and_says_so(fake):
    it = run(fake, _pods([8.0] * 20), [_item()], plan=_plan("a100_80gb", "3g.40gb"),
             compute_metric="DCGM_FI_DEV_GPU_UTIL")["items"][0]
    assert it["observed"]["compute_p95"] is None and "always 0 on MIG devices" in it["reason"]


def test_too_little_history_is_left_unchanged(fake):
    out = run(fake, _pods([8.0] * 20, first=NOW - 3 * 3600), [_item()], plan=_plan("a100_80gb", "3g.40gb"))
    it = out["items"][0]
    assert it["changed"] is False and it["after"] == it["before"] and out["changes"] == []
    assert it["reason"] == "only 3.00 h of history (min_history 86400s): left unchanged"
    assert out["demand"] == [_item()]


def test_item_without_series_gets_a_reason(fake):
    out = run(fake, _pods([8.0] * 20), [_item(), _item(name="reranker", memory_gb=18)],
              plan=_plan("a100_80gb", "3g.40gb"))
    other = out["items"][1]
    assert other["observed"] is None and other["changed"] is False
    assert "no DCGM_FI_DEV_FB_USED series of its pods" in other["reason"] and "workload is reranker" in other["reason"]


def test_pods_map_by_their_demand_item_label(fake):
    series = _pods([8.0] * 20, name="srv")  # pods of workload "srv" labelled as item "embedder"
    pods = [{"metadata": {"namespace": "search", "name": s["pod"], "labels": {"gpuops.k8s/demand-item": "embedder"}}}
            for s in series]
    assert run(fake, series, [_item()])["items"][0]["observed"] is None
    assert run(fake, series, [_item()], pods=pods)["items"][0]["observed"]["memory_gb_peak"] == 8.0


def test_a_missing_metric_is_an_error_naming_it(fake):
    with pytest.raises(GpuOpsError) as e:
        run(fake, _pods([8.0] * 20), [_item()], missing=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",))
    assert "no series of DCGM_FI_PROF_GR_ENGINE_ACTIVE" in e.value.msg and fake.url in e.value.msg


def test_a_bad_memory_metric_name(fake):
    with pytest.raises(GpuOpsError) as e:
        run(fake, _pods([8.0] * 20), [_item()], memory_metric="fb used")
    assert "is not a Prometheus metric name" in e.value.msg


def test_queries_are_one_per_statistic_fleet_wide():
    qs = rightsize.queries("DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 7 * 86400, 300)
    by = "exported_namespace, exported_pod, namespace, pod"
    assert qs["memory_peak"] == "max by (%s) (max_over_time(DCGM_FI_DEV_FB_USED[604800s]))" % by
    assert qs["first"] == "min by (%s) (min_over_time(timestamp(DCGM_FI_DEV_FB_USED)[604800s:300s]))" % by


def test_series_scraped_through_a_service_monitor_use_the_exported_pod_labels(fake):
    series = [dict(s, scraped=True) for s in _pods([8.0] * 20)]
    it = run(fake, series, [_item()], plan=_plan("a100_80gb", "3g.40gb"))["items"][0]
    assert it["observed"]["memory_gb_peak"] == 8.0 and it["after"]["profile"] == "1g.10gb"


def test_run_writes_demand_out_once_and_never_in_check_mode(fake, tmp_path):
    fake.vectors = series_vectors(_pods([8.0] * 20, first=time.time() - 48 * 3600))  # run() evaluates at now
    out_file = tmp_path / "demand.yml"
    params = {"prometheus_url": fake.url, "demand": [_item()], "demand_out": str(out_file), "window": "7d",
              "min_history": "1m", "plan": _plan("a100_80gb", "3g.40gb")}
    check = rightsize.run(params, check_mode=True, diff=True)
    assert check["changed"] is True and not out_file.exists() and "memory_gb: 9.6" in check["diff"]["after"]
    first = rightsize.run(params)
    assert first["changed"] is True and rightsize.load_demand_file(str(out_file)) == first["demand"]
    assert rightsize.run(params)["changed"] is False
    with pytest.raises(GpuOpsError):
        rightsize.run(dict(params, prometheus_url="http://127.0.0.1:1", demand_out=str(tmp_path / "x.yml")))
    assert not (tmp_path / "x.yml").exists()


def test_the_fake_evaluates_promql_as_documented():
    # quantile_over_time: rank phi * (n - 1), linear between the neighbours: [1..5] at 0.95 -> rank 3.8 -> 4.8
    series = [{"labels": {"__name__": "m", "pod": "a", "gpu": "0"}, "samples": [(t, float(t)) for t in (5, 1, 4, 2, 3)]},
              {"labels": {"__name__": "m", "pod": "a", "gpu": "1"}, "samples": [(1, 10.0), (2, 20.0)]},
              {"labels": {"__name__": "m", "pod": "b", "gpu": "0"}, "samples": [(1, 7.0), (9, 99.0)]}]
    at = 5.0  # the range [5s] at 5 holds 0 < ts <= 5: pod b's sample at 9 is outside
    ev = dict((lab["pod"], v) for lab, v in evaluate("max by (pod) (quantile_over_time(0.95, m[5s]))", series, at))
    assert ev == {"a": pytest.approx(19.5), "b": 7.0}  # gpu 1: rank 0.95 -> 10 + 0.95 * 10; gpu 0: 4.8
    ev = dict((lab["pod"], v) for lab, v in evaluate("avg by (pod) (quantile_over_time(0.5, m[5s]))", series, at))
    assert ev == {"a": pytest.approx((3.0 + 15.0) / 2), "b": 7.0}
    assert evaluate("count(max_over_time(m[5s]))", series, at) == [({}, 3)]
    assert dict((lab["pod"], v) for lab, v in evaluate("sum by (pod) (count_over_time(m[5s]))", series, at)) == \
        {"a": 7, "b": 1}


def _curve_pods():
    """One item's pods with different curves (GB and engine-active; whole A100s), 21 samples each: the 0.95-quantile
    of 21 samples is the 20th smallest (rank 0.95 * 20 = 19), the median the 11th.

    x: memory 4 GB x 20 and one 18 GB spike (peak 18, p95 4); engine 0.1
    y: two GPUs; gpu 0 memory 0, 1, ..., 20 GB (peak 20, p95 19, p50 10), engine 0/40 ... 20/40 (p95 0.475,
       peak 0.5, p50 0.25); gpu 1 memory 1 GB, engine 0.05 (the pod's max: p95 19 GB / 0.475, avg would be 10 / 0.2625)
    z: memory 2 GB, engine 0.2
    The item: peak max(18, 20, 2) = 20 GB, p95 max(4, 19, 2) = 19 GB; compute p95 max(0.1, 0.475, 0.2) = 0.475,
    peak 0.5. With the default 20 % headroom: memory max(19 * 1.2, 20) = 22.8 GB, compute 0.475 * 1.2 = 0.57."""
    base = {"namespace": "search", "first": NOW - 48 * 3600}
    return [dict(base, pod="embedder-7d9c5b6f4-x2b4k", mem=[4 * GIB] * 20 + [18 * GIB], compute=[0.1] * 21),
            dict(base, pod="embedder-7d9c5b6f4-q9z7m", gpu=0, mem=[i * GIB for i in range(21)],
                 compute=[i / 40.0 for i in range(21)]),
            dict(base, pod="embedder-7d9c5b6f4-q9z7m", gpu=1, mem=[1 * GIB] * 21, compute=[0.05] * 21),
            dict(base, pod="embedder-7d9c5b6f4-vw8tn", mem=[2 * GIB] * 21, compute=[0.2] * 21)]


def test_an_items_p95_and_peak_are_the_largest_over_its_pods_and_their_devices(fake):
    it = run(fake, _curve_pods(), [_item(compute=1.0)])["items"][0]
    obs = it["observed"]
    assert (obs["memory_gb_peak"], obs["memory_gb_p95"]) == (20.0, 19.0), obs
    assert (obs["compute_peak"], obs["compute_p95"]) == (0.5, 0.475), obs
    assert obs["samples"] == 4 * 21 and obs["history_h"] == 48.0


def test_headroom_applies_to_memory_and_compute(fake):
    it = run(fake, _curve_pods(), [_item(compute=1.0)])["items"][0]
    assert it["after"]["memory_gb"] == 22.8 and it["after"]["compute"] == 0.57, it["reason"]
    it = run(fake, _curve_pods(), [_item(compute=1.0)], headroom_pct=50)["items"][0]
    assert it["after"]["memory_gb"] == 28.5 and it["after"]["compute"] == 0.72, it["reason"]  # 19 * 1.5; 0.7125 up


# --- the rules the mutation run (make mutate) found unpinned: each expected value worked out by hand


def test_plan_must_be_a_gpu_plan_result_and_its_inner_plan_is_accepted(fake):
    for bad, named in (({"nodes": []}, "got keys ['nodes']"), ([1], "got keys list"),
                       ({"plan": {"decisions": "x"}}, "got keys ['decisions']")):
        with pytest.raises(GpuOpsError) as e:
            run(fake, _pods([8.0] * 20), [_item()], plan=bad)
        assert "plan must be a gpu_plan result (its 'plan', with 'decisions')" in e.value.msg and named in e.value.msg
    # gpu_plan's 'plan' itself (without the result around it) names the model and the profile the same way
    it = run(fake, _pods([8.0] * 20), [_item()], plan=_plan("a100_80gb", "3g.40gb")["plan"])["items"][0]
    assert it["model"] == "a100_80gb" and it["before"]["profile"] == "3g.40gb" and it["after"]["profile"] == "1g.10gb"


def test_pods_map_by_their_owner_reference_or_owner(fake):
    # series of pods named srv-...: no item "srv"; their owner (a ReplicaSet of Deployment embedder, or a
    # StatefulSet embedder) maps them to item embedder (plan/workloads.py: the owner decides)
    series = _pods([8.0] * 20, name="srv")
    rs = [{"metadata": {"namespace": "search", "name": s["pod"], "labels": {"app": "x"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "embedder-7d9c5b6f4"}]}} for s in series]
    sts = [{"namespace": "search", "name": s["pod"], "owner": {"kind": "StatefulSet", "name": "embedder"}}
           for s in series]
    assert run(fake, series, [_item()])["items"][0]["observed"] is None
    assert run(fake, series, [_item()], pods=rs)["items"][0]["observed"]["memory_gb_peak"] == 8.0
    assert run(fake, series, [_item()], pods=sts)["items"][0]["observed"]["memory_gb_peak"] == 8.0


def test_an_idle_device_is_dropped_and_the_pods_after_it_are_read(fake):
    # an idle device (no pod label: nothing runs on it) listed before the item's pods, 70 GB used
    idle = [{"labels": {"__name__": name, "gpu": "7", "Hostname": "node-a", "modelName": "NVIDIA A100-SXM4-80GB"},
             "samples": [(NOW - 48 * 3600 + 60.0 * i, v) for i in range(20)]}
            for name, v in (("DCGM_FI_DEV_FB_USED", 70 * GIB), ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.9),
                            ("DCGM_FI_DEV_GPU_UTIL", 90.0))]
    fake.vectors = series_answer(idle + stored_series(_pods([8.0] * 20)))
    out = rightsize.rightsize(prom.Prometheus(fake.url, timeout_s=5),
                              {"demand": [_item()], "plan": _plan("a100_80gb", "3g.40gb"), "min_history": "24h"}, now=NOW)
    assert out["items"][0]["observed"]["memory_gb_peak"] == 8.0 and out["items"][0]["after"]["memory_gb"] == 9.6


def test_gpu_util_of_whole_gpus_is_a_percentage(fake):
    # whole GPUs (no GPU_I_PROFILE): DCGM_FI_DEV_GPU_UTIL 40 (%) is 0.4 of a GPU; + 20 % = 0.48
    it = run(fake, _pods([8.0] * 20, profile=None, compute=0.4), [_item(compute=1.0)],
             plan=_plan("a100_80gb", "3g.40gb"), compute_metric="DCGM_FI_DEV_GPU_UTIL")["items"][0]
    assert it["observed"]["compute_p95"] == 0.4 and it["observed"]["compute_peak"] == 0.4
    assert it["after"]["compute"] == 0.48 and "compute p95 0.40 +20 % = 0.48 of a GPU" in it["reason"]


@pytest.mark.parametrize("model_name,profile,engine,share", [
    ("NVIDIA A30", "2g.12gb", 0.5, 0.25),           # A30: 4 compute slices; 2 of them at 0.5
    ("NVIDIA Mystery GPU", "3g.40gb", 0.7, 0.3),      # a model the catalog does not know: 7 slices, 3 of them
    ("NVIDIA A100-SXM4-80GB", "odd", 0.6, 0.6),       # no <n>g. in the profile name: the ratio as it is
])
def test_engine_active_of_a_mig_device_scales_by_its_slices(fake, model_name, profile, engine, share):
    series = [dict(s, model=model_name) for s in _pods([8.0] * 20, profile=profile, compute=engine)]
    it = run(fake, series, [_item(compute=1.0)], headroom_pct=0)["items"][0]
    assert it["observed"]["compute_p95"] == pytest.approx(share, abs=1e-4)
    assert it["after"]["compute"] == pytest.approx(share, abs=1e-9)


def test_a_negative_headroom_is_refused(fake):
    with pytest.raises(GpuOpsError) as e:
        run(fake, _pods([8.0] * 20), [_item()], headroom_pct=-5)
    assert e.value.msg == "headroom_pct must be 0 or more, got -5.0"


def test_a_whole_gpu_resource_is_named_with_its_mode(fake):
    plan = {"plan": {"decisions": [{"tenant": "search", "name": "embedder", "mode": "time-slicing", "model": "l40s_48gb",
                                    "resource": "nvidia.com/gpu"}]}}
    it = run(fake, _pods([10.0] * 20, profile=None), [_item(isolation="shared")], plan=plan)["items"][0]
    assert it["before"]["profile"] == "nvidia.com/gpu (time-slicing)"
    assert it["after"]["profile"] == "25 % of a l40s_48gb (time-slicing)"  # 12 GB of 48
    assert it["reason"].startswith("nvidia.com/gpu (time-slicing) -> 25 % of a l40s_48gb (time-slicing): ")


def test_no_model_names_the_memory_only(fake):
    it = run(fake, _pods([8.0] * 20), [_item()])["items"][0]
    assert it["model"] is None and it["after"]["profile"] is None
    assert it["reason"].startswith("- -> 9.6 GB: p95 8.0 GB")


def test_demand_file_errors_name_the_file(tmp_path):
    missing = str(tmp_path / "none.yml")
    with pytest.raises(GpuOpsError, match="demand_file %s cannot be read" % missing):
        rightsize.load_demand_file(missing)
    bad = tmp_path / "bad.yml"
    bad.write_text("demand: [\n")
    with pytest.raises(GpuOpsError, match="demand_file %s is not YAML" % bad):
        rightsize.load_demand_file(str(bad))
    for text in ("- a\n- b\n", "demand: 3\n"):
        bad.write_text(text)
        with pytest.raises(GpuOpsError, match="demand_file %s must be a mapping with a 'demand' list" % bad):
            rightsize.load_demand_file(str(bad))
    with pytest.raises(GpuOpsError, match=r"give demand or demand_file \(gpu_plan's demand list\)"):
        rightsize.run({"prometheus_url": "http://127.0.0.1:1"})


def test_demand_out_not_a_demand_file_is_replaced_and_an_unwritable_one_fails(fake, tmp_path):
    fake.vectors = series_vectors(_pods([8.0] * 20, first=time.time() - 48 * 3600))
    out_file = tmp_path / "demand.yml"
    out_file.write_text("not: [a demand file\n")
    params = {"prometheus_url": fake.url, "demand": [_item(name="reranker")], "demand_out": str(out_file)}
    first = rightsize.run(params)  # no series of reranker: no change, but the file is not its demand
    assert first["changed"] is True and first["changes"] == []
    assert rightsize.load_demand_file(str(out_file)) == [_item(name="reranker")]
    assert rightsize.run(params)["changed"] is False
    nowhere = str(tmp_path / "no-dir" / "demand.yml")
    with pytest.raises(GpuOpsError, match="demand_out %s cannot be written" % nowhere):
        rightsize.run(dict(params, demand_out=nowhere))


def test_reason_in_full(fake):
    # docs/rightsize.md's example, then the samples (3 pods x 100) and the history (first sample 48 h ago)
    mem = [7.0] * 90 + [8.0] * 8 + [8.5, 9.0]
    it = run(fake, _pods(mem), [_item()], plan=_plan("a100_80gb", "3g.40gb"))["items"][0]
    assert it["reason"] == ("3g.40gb -> 1g.10gb: p95 8.0 GB, peak 9.0 GB, +20 % headroom = 9.6 GB, never below the "
                            "peak: memory_gb 40 -> 9.6 (300 samples, 48.0 h)")


def test_engine_active_missing_for_an_item_leaves_its_compute_without_the_gpu_util_note(fake):
    # the metric exists (another workload's pods) but not for embedder's pods: its compute stays as declared, and
    # the "always 0 on MIG devices" note belongs to DCGM_FI_DEV_GPU_UTIL only
    series = stored_series(_pods([8.0] * 20), missing=("DCGM_FI_PROF_GR_ENGINE_ACTIVE",)) + \
        stored_series(_pods([8.0] * 20, name="other"))
    fake.vectors = series_answer(series)
    out = rightsize.rightsize(prom.Prometheus(fake.url, timeout_s=5),
                              {"demand": [_item(compute=0.5)], "plan": _plan("a100_80gb", "3g.40gb")}, now=NOW)
    it = out["items"][0]
    assert it["observed"]["compute_p95"] is None and it["after"]["compute"] == 0.5
    assert it["reason"].endswith("memory_gb 40 -> 9.6 (60 samples, 48.0 h)"), it["reason"]


def test_observed_values_are_rounded_as_documented(fake):
    # RETURN: GB to 3 decimals, fractions of a GPU to 4: 1000 MiB = 0.9765625 GB -> 0.977; engine 1/3 -> 0.3333
    series = _pods([1000.0 / GIB] * 20, profile=None, compute=1.0 / 3)
    obs = run(fake, series, [_item(compute=1.0)])["items"][0]["observed"]
    assert obs["memory_gb_peak"] == 0.977 and obs["memory_gb_p95"] == 0.977
    assert obs["compute_peak"] == 0.3333 and obs["compute_p95"] == 0.3333


def test_run_waits_30_s_per_answer_by_default(monkeypatch):
    # doc_fragments/prometheus.py: timeout_s defaults to 30
    seen = []

    def client(url, **kw):
        seen.append(kw)
        raise GpuOpsError("stop")

    monkeypatch.setattr(prom, "Prometheus", client)
    for extra, want in (({}, 30), ({"timeout_s": 7}, 7)):
        with pytest.raises(GpuOpsError, match="stop"):
            rightsize.run(dict({"prometheus_url": "http://x", "demand": [_item()]}, **extra))
        assert seen[-1]["timeout_s"] == want


def test_without_pyyaml_demand_out_is_json(monkeypatch, tmp_path):
    # PyYAML missing (it comes with ansible-core, but the module_utils do not require it): JSON, 2-space indent
    monkeypatch.setitem(sys.modules, "yaml", None)
    text = rightsize.render_demand_file({"demand": [{"name": "a", "memory_gb": 9.6}], "changes": []})
    assert text == '{\n  "demand": [\n    {\n      "name": "a",\n      "memory_gb": 9.6\n    }\n  ],\n  "changes": []\n}\n'
    path = tmp_path / "d.json"
    path.write_text(text)
    assert rightsize.load_demand_file(str(path)) == [{"name": "a", "memory_gb": 9.6}]
