# -*- coding: utf-8 -*-
"""gpu_health_check (against the simulator), gpu_health_plan and mig_rollout_plan, run in-process."""


from ansible_collections.gpuops.k8s.plugins.modules import (gpu_health_check, gpu_health_plan, mig_rollout_plan,
                                                            nvml_simulator)

from module_harness import Fail, call


def test_health_check_reads_the_simulator(tmp_path):
    sim = str(tmp_path / "h.json")
    call(nvml_simulator, {"path": sim, "gpus": [{"model": "a100_80gb", "count": 2}]})
    ok = call(gpu_health_check, {"simulator": sim, "expected_gpus": 2, "kernel_log_source": "none"})
    assert ok["healthy"] and ok["changed"] is False and ok["gpu_count"] == 2
    call(nvml_simulator, {"path": sim, "health": [{"gpu": 1, "ecc_volatile_uncorrected": 12}]})
    log = tmp_path / "kmsg"
    log.write_text("NVRM: Xid (PCI:0000:99:00): 31, pid=1, page fault\n")
    bad = call(gpu_health_check, {"simulator": sim, "expected_gpus": 3, "kernel_log_path": str(log)})
    assert not bad["healthy"]
    assert sorted(p["check"] for p in bad["problems"]) == ["ecc_uncorrected", "gpus_missing"]
    assert bad["xids"][0]["action"] == "ignore"


def test_health_check_bad_xid_action_fails_clearly():
    res = call(gpu_health_check, {"gpus": [], "kernel_log_source": "none", "xid_actions": {"48": "explode"}},
               expect=Fail)
    assert "must be one of ignore, drain, reset_gpu, reboot" in res["msg"]


def test_health_plan_module():
    nodes = [{"metadata": {"name": "n%d" % i}, "spec": {}} for i in range(4)]
    verdicts = {"n0": {"healthy": False, "problems": [], "reason": "GPU 0: Xid 79", "remediation": "reboot"}}
    res = call(gpu_health_plan, {"verdicts": verdicts, "nodes": nodes, "max_unhealthy_fraction": 0.5})
    acts = dict((a["node"], a) for a in res["actions"])
    assert acts["n0"]["action"] == "cordon" and acts["n0"]["applied"] is False
    assert res["changed"] is False and res["dry_run"] is True
    res = call(gpu_health_plan, {"verdicts": verdicts, "nodes": nodes, "max_unhealthy_fraction": 0.1})
    assert dict((a["node"], a["action"]) for a in res["actions"])["n0"] == "blocked"


def test_rollout_plan_module_takes_k8s_info_lists():
    node = {"metadata": {"name": "a", "labels": {"nvidia.com/mig.config": "x", "nvidia.com/mig.config.state": "success"}}}
    res = call(mig_rollout_plan, {"hosts": ["a", "b"], "nodes": {"a": [node], "b": [dict(node, metadata={"name": "b"})]},
                                  "target": "y", "known_configs": ["x", "y", "all-disabled"]})
    assert res["batches"] == [["a"], ["b"]] and res["serial"] == [1, 1]
    assert res["per_node"]["a"]["last_good"] == "x"
    # b records no layout: it rolls back to all-disabled, which the file must define
    res = call(mig_rollout_plan, {"hosts": ["a", "b"], "nodes": {"a": [node], "b": [dict(node, metadata={"name": "b"})]},
                                  "target": "y", "known_configs": ["x", "y"]}, expect=Fail)
    assert res["unknown_last_good"] == {"b": "all-disabled"} and "node b ('all-disabled')" in res["msg"]
    res = call(mig_rollout_plan, {"hosts": ["a", "b"], "nodes": {"a": [node], "b": []}, "target": "y"}, expect=Fail)
    assert res["missing"] == ["b"]
