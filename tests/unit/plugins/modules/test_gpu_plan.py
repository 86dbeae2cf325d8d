# -*- coding: utf-8 -*-
"""gpu_plan run in-process: the plan, the report (check mode writes nothing, written once, diff), errors."""
from ansible_collections.gpuops.k8s.plugins.modules import gpu_plan

from module_harness import Fail, call

NODES = [{"name": "a100-0", "gpus": [{"model": "NVIDIA A100-SXM4-80GB", "count": 2}], "current": "all-disabled"},
         {"name": "l40s-0", "gpus": [{"model": "NVIDIA L40S", "count": 2}]}]
DEMAND = [{"tenant": "team-a", "name": "chat", "replicas": 7, "memory_gb": 9, "kind": "inference", "isolation": "strict"},
          {"tenant": "team-b", "name": "nb", "replicas": 4, "memory_gb": 10, "kind": "dev", "isolation": "shared"}]


def test_plan_report_check_mode_and_diff(tmp_path):
    args = {"nodes": NODES, "demand": DEMAND, "report": str(tmp_path / "out")}
    check = call(gpu_plan, dict(args, _ansible_check_mode=True))
    assert check["changed"] is True and not (tmp_path / "out").exists()
    assert check["report"]["changed_files"][0].endswith("plan.md")
    first = call(gpu_plan, dict(args, _ansible_diff=True))
    plan = first["plan"]
    assert first["changed"] is True and "_planned_gpus" not in plan
    md = (tmp_path / "out" / "plan.md").read_text()
    assert first["diff"][1]["after"] == md and "| team-a | chat | 7 | 7 | mig |" in md
    assert "a100-0: mig_config=all-disabled" in first["diff"][0]["before"]
    # one GPU gets 7 x 1g.10gb, the idle one stays MIG-disabled: a per-GPU config
    assert "a100-0: mig_config=plan-" in first["diff"][0]["after"]
    assert "l40s-0: mig_config=- device_plugin_config=plan-ts-4" in first["diff"][0]["after"]
    for pic in ("plan-slices.svg", "plan-utilisation.svg", "plan-cost.svg"):
        assert (tmp_path / "out" / pic).read_text().startswith("<svg")
    assert plan["summary"]["gpus_used"] == 2 and plan["summary"]["reconfigured_gpus"] == 1
    assert plan["quotas"] == {"team-a": {"hard": {"requests.nvidia.com/mig-1g.10gb": 7}},
                              "team-b": {"hard": {"requests.nvidia.com/gpu.shared": 4}}}
    second = call(gpu_plan, args)
    assert second["changed"] is False and second["report"]["changed_files"] == []


def test_no_report_changes_nothing():
    res = call(gpu_plan, {"nodes": NODES, "demand": DEMAND, "solver": "heuristic"})
    assert res["changed"] is False and res["report"] is None and res["plan"]["summary"]["solver"] == "heuristic"


def test_bad_input_fails_naming_the_valid_choices(tmp_path):
    bad = [dict(DEMAND[0], kind="serving")]
    res = call(gpu_plan, {"nodes": NODES, "demand": bad, "report": str(tmp_path / "never")}, expect=Fail)
    assert "valid kinds: inference, training, dev" in res["msg"] and not (tmp_path / "never").exists()
    res = call(gpu_plan, {"nodes": [{"name": "x", "gpus": [{"model": "NVIDIA Z9", "count": 1}]}], "demand": DEMAND},
               expect=Fail)
    assert "unknown GPU model 'NVIDIA Z9'" in res["msg"] and "NVIDIA L40S" in res["valid_models"]
