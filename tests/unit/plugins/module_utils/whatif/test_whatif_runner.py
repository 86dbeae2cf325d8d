# -*- coding: utf-8 -*-
"""The what-if runs: options, summaries over seeds, determinism, the report."""
import os

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import report, runner

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
NODES = os.path.join(FIX, "openb_nodes_sample.csv")
PODS = os.path.join(FIX, "openb_pods_sample.csv")
PRICES = {"G2": 1.0, "G3": 1.0, "P100": 0.5, "T4": 0.4, "V100M32": 2.0}


def base(**kw):
    p = {"nodes_csv": NODES, "pods_csv": PODS}
    p.update(kw)
    return p


@pytest.mark.parametrize("params, message", [
    ({"scoring": "fastest"}, "scoring 'fastest' is not one of"),
    ({"sharing": "vgpu"}, "sharing 'vgpu' is not one of"),
    ({"inflation": -1}, "inflation must be between 0"),
    ({"inflation": "lots"}, "inflation must be a number"),
    ({"seeds": [1, 1]}, "must not repeat"),
    ({"sample_nodes": 0}, "sample_nodes must be a positive integer"),
    ({"sharing": "mig"}, "sharing mig needs mig_config"),
    ({"sharing": "planned"}, "sharing planned needs plan"),
    ({"prices": {"T4": -1}}, "prices.T4 must be a number >= 0"),
    ({"tie_break": "first"}, "tie_break must be auto, rank or random"),
])
def test_option_errors(params, message):
    with pytest.raises(GpuOpsError, match=message):
        runner.normalise(base(**params))


def test_exactly_one_input_of_each_kind():
    with pytest.raises(GpuOpsError, match="exactly one of nodes_csv"):
        runner.normalise({"pods_csv": PODS})
    with pytest.raises(GpuOpsError, match="exactly one of pods_csv"):
        runner.normalise({"nodes_csv": NODES, "pods_csv": PODS, "pods": [{}]})


def test_run_fields_and_determinism():
    r1 = runner.run(base(scoring=["random", "fgd"], sharing=["exclusive", "fractional"], prices=PRICES))
    r2 = runner.run(base(scoring=["random", "fgd"], sharing=["exclusive", "fractional"], prices=PRICES))
    combos = [("exclusive", "random"), ("exclusive", "fgd"), ("fractional", "random"), ("fractional", "fgd")]
    assert [(r["sharing"], r["scoring"]) for r in r1["runs"]] == combos
    assert [r["curve"] for r in r1["runs"]] == [r["curve"] for r in r2["runs"]]
    assert r1["curve"] == r1["runs"][0]["curve"] and r1["summary"] == r1["runs"][0]["summary"]
    top = [pt["arrived_pct"] for pt in r1["curve"]]
    assert top[0] == 0 and top[-1] == 130
    s = r1["runs"][3]["summary"]
    assert set(runner.SUMMARY_FIELDS) <= set(s)
    assert 0 < s["served_pct_at_100"] <= s["allocated_pct_at_100"] <= 100
    excl = r1["runs"][1]["summary"]
    assert excl["gpu_hours_saved"] == 0.0 and s["gpu_hours_saved"] > 0
    assert excl["served_pct_at_100"] < excl["allocated_pct_at_100"]  # whole GPUs bound to sharing pods
    assert r1["cluster"] == {"nodes": 25, "gpu_nodes": 25, "gpus": 116,
                             "gpus_by_model": {"G2": 72, "G3": 8, "P100": 4, "T4": 24, "V100M32": 8}}
    assert s["cost_per_hour"] == pytest.approx(72 * 1.0 + 8 * 1.0 + 4 * 0.5 + 24 * 0.4 + 8 * 2.0)
    served_gpu_h = s["served_pct_at_100"] / 100.0 * 116
    assert s["cost_per_served_gpu_hour"] == pytest.approx(s["cost_per_hour"] / served_gpu_h, rel=2e-3)
    assert r1["workload"]["pods"] == 272 and r1["workload"]["removed_by_inflation"] > 0


def test_cost_unknown_without_prices():
    r = runner.run(base(sharing="fractional", scoring="best-fit"))
    s = r["summary"]
    assert s["cost_per_hour"] is None and s["cost_saved_per_hour"] is None
    assert r["prices"] == {"G2": None, "G3": None, "P100": None, "T4": None, "V100M32": None}


def test_catalog_prices_for_catalog_models():
    nodes = [{"name": "a%d" % i, "gpus": [{"model": "a100_80gb", "count": 8}], "cpu_milli": 96000, "memory_mib": 786432}
             for i in range(3)]
    pods = [{"cpu_milli": 8000, "memory_mib": 65536, "num_gpu": 1, "gpu_milli": 500}] * 20
    r = runner.run({"nodes": nodes, "pods": pods, "scoring": "fgd", "sharing": ["exclusive", "mig"],
                    "mig_config": {"a100_80gb": "all-balanced"}})
    price = r["prices"]["a100_80gb"]
    assert price and r["summary"]["cost_per_hour"] == pytest.approx(24 * price)
    # 500 milli fits no all-balanced slice (3g.40gb: 3/7 of the compute) and MIG leaves no whole GPU
    mig_run = r["runs"][1]["summary"]
    assert mig_run["served_pct_at_100"] == 0.0 and r["summary"]["served_pct_at_100"] == 50.0
    assert mig_run["unscheduled_pods"] == r["workload"]["arrivals"]


def test_seeds_give_means_spreads_and_per_seed_values():
    r = runner.run(base(scoring="best-fit", sharing="fractional", seeds=[1, 2, 3]))
    s = r["summary"]
    vals = [x["allocated_pct_at_100"] for x in s["per_seed"]]
    assert s["seeds"] == [1, 2, 3] and len(vals) == 3
    assert s["allocated_pct_at_100"] == pytest.approx(sum(vals) / 3, abs=0.01)
    assert s["spread"]["allocated_pct_at_100"]["min"] == min(vals)
    assert r["workload"]["seeds"] == [1, 2, 3] and len(r["workload"]["arrivals"]) == 3
    singles = [runner.run(base(scoring="best-fit", sharing="fractional", seed=k))["summary"]["allocated_pct_at_100"]
               for k in (1, 2, 3)]
    assert singles == vals


def test_sample_nodes_and_pods_per_node():
    r = runner.run(base(scoring="kube-default", sample_nodes=10, pods_per_node=3))
    assert r["cluster"]["nodes"] == 10 and r["cluster"]["sampled"] == 10
    with pytest.raises(GpuOpsError, match="holds no GPU"):
        runner.sample([n._replace(gpus=0, model=None) for n in runner.load_inputs(runner.normalise(base()))[0]], 3, 1)


def test_mig_and_planned_runs():
    r = runner.run(base(sharing=["mig", "planned"], scoring="best-fit",
                        mig_config={"*": [{"devices": "all", "mig-enabled": False},
                                          {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]},
                        plan={"mig_parted_config": {"version": "v1", "mig-configs": {
                            "bal": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}},
                            "node_configs": [{"node": "openb-node-0050", "mig_config": "bal"}]}))
    for run in r["runs"]:
        assert 0 < run["summary"]["allocated_pct_at_100"] <= 100


def test_bad_mig_config_fails_before_any_replay(tmp_path):
    cfg = tmp_path / "mig.yml"
    cfg.write_text("A100: all-balanced\n")
    with pytest.raises(GpuOpsError, match=r"mig.yml, line 1, column 1: unknown model A100"):
        runner.run(base(sharing="mig", mig_config=str(cfg)))


def test_report_is_written_once(tmp_path):
    r = runner.run(base(scoring=["random", "fgd"], sharing="fractional"))
    out = tmp_path / "rep"
    first = report.write(r, str(out))
    assert first["changed"] and sorted(os.path.basename(f) for f in first["files"]) == sorted(
        ["whatif.md"] + list(report.PICTURES))
    text = (out / "whatif.md").read_text()
    assert "| fractional | fgd |" in text and "![allocation](whatif-allocation.svg)" in text
    svg = (out / "whatif-allocation.svg").read_text()
    assert svg.startswith("<svg") and ">random<" in svg and ">fgd<" in svg
    again = runner.run(base(scoring=["random", "fgd"], sharing="fractional"))
    assert report.write(again, str(out))["changed"] is False
    other = runner.run(base(scoring=["random", "fgd"], sharing="fractional", seed=9))
    check = report.write(other, str(out), check_mode=True)
    assert check["changed"] and (out / "whatif.md").read_text() == text
