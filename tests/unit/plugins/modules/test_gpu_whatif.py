# -*- coding: utf-8 -*-
"""gpu_whatif run in-process: results, the report (written once, check mode, diff), errors."""
import os

from ansible_collections.gpuops.k8s.plugins.modules import gpu_whatif

from module_harness import Fail, call

FIX = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "whatif", "fixtures")
ARGS = {"nodes_csv": os.path.join(FIX, "openb_nodes_sample.csv"), "pods_csv": os.path.join(FIX, "openb_pods_sample.csv"),
        "scoring": ["random", "best-fit", "fgd"], "sharing": "fractional"}


def test_results_and_report_written_once(tmp_path):
    args = dict(ARGS, report=str(tmp_path / "out"))
    check = call(gpu_whatif, dict(args, _ansible_check_mode=True))
    assert check["changed"] is True and not (tmp_path / "out").exists()
    first = call(gpu_whatif, dict(args, _ansible_diff=True))
    assert first["changed"] is True and first["diff"]["before"] == ""
    assert first["diff"]["after"] == (tmp_path / "out" / "whatif.md").read_text()
    assert [r["scoring"] for r in first["runs"]] == ["random", "best-fit", "fgd"]
    assert first["curve"] == first["runs"][0]["curve"] and "params" not in first
    assert first["summary"]["allocated_pct_at_100"] > 0 and first["timing"]["total_seconds"] > 0
    assert first["report"]["path"] == str(tmp_path / "out" / "whatif.md")
    second = call(gpu_whatif, args)
    assert second["changed"] is False and second["report"]["changed_files"] == []
    assert _untimed(second["runs"]) == _untimed(first["runs"])


def _untimed(runs):
    return [dict((k, v) for k, v in r.items() if k != "replay_seconds") for r in runs]


def test_no_report_changes_nothing():
    res = call(gpu_whatif, dict(ARGS, scoring="kube-default", sharing=["exclusive", "fractional"], seeds=[1, 2]))
    assert res["changed"] is False and res["report"] is None
    assert res["summary"]["seeds"] == [1, 2] and "spread" in res["summary"]


def test_bad_csv_fails_with_file_line_and_column_and_writes_nothing(tmp_path):
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nok,1000,10,1,500\nbad,1000,10,0,250\n")
    res = call(gpu_whatif, dict(ARGS, pods_csv=str(pods), report=str(tmp_path / "out")), expect=Fail)
    assert res["msg"].startswith("%s, line 3, column 5 (gpu_milli): the pod requests no GPU (num_gpu 0)" % pods)
    assert res["line"] == 3 and res["column"] == 5
    assert not (tmp_path / "out").exists()


def test_unknown_model_in_mig_config(tmp_path):
    res = call(gpu_whatif, dict(ARGS, sharing="mig", mig_config={"H100": "all-balanced"}), expect=Fail)
    assert "unknown model H100 in mig_config" in res["msg"] and res["models"] == ["G2", "G3", "P100", "T4", "V100M32"]


def test_exclusive_inputs():
    res = call(gpu_whatif, dict(ARGS, nodes=[{"name": "a", "gpus": [{"model": "T4", "count": 1}]}]), expect=Fail)
    assert "parameters are mutually exclusive: nodes_csv|nodes" in res["msg"]


def test_departures_and_replanned_report_written_once(tmp_path):
    args = dict(ARGS, scoring="kube-default", sharing=["exclusive", "replanned"], departures=True,
                report=str(tmp_path / "out"))
    first = call(gpu_whatif, args)
    assert first["changed"] is True and first["departures"] is True
    assert [r["sharing"] for r in first["runs"]] == ["exclusive", "replanned"]
    assert first["summary"]["gpu_hours_held"] > 0 and "hour" in first["curve"][0]
    assert sorted(os.listdir(str(tmp_path / "out"))) == ["whatif-held.svg", "whatif-pending.svg",
                                                         "whatif-reconfigured.svg", "whatif.md"]
    second = call(gpu_whatif, args)
    assert second["changed"] is False


def test_bad_replan_budget_fails_naming_the_valid_forms():
    res = call(gpu_whatif, dict(ARGS, sharing="replanned", departures=True, replan_budget="200%"), expect=Fail)
    assert "replan_budget must be a number of GPUs >= 0 (e.g. 300) or a percentage" in res["msg"]
    res = call(gpu_whatif, dict(ARGS, sharing="replanned"), expect=Fail)
    assert res["msg"].startswith("sharing replanned needs departures: true")


def test_without_numpy_it_fails_naming_the_package_before_reading_anything(monkeypatch, tmp_path):
    from ansible_collections.gpuops.k8s.plugins.module_utils.common import deps
    monkeypatch.setitem(deps._IMPORT_ERRORS, "numpy", "ImportError: No module named 'numpy'")
    res = call(gpu_whatif, dict(ARGS, nodes_csv=str(tmp_path / "absent.csv"), report=str(tmp_path / "out")), expect=Fail)
    assert "Failed to import the required Python library (numpy)" in res["msg"]
    assert res["exception"] == "ImportError: No module named 'numpy'" and not (tmp_path / "out").exists()
