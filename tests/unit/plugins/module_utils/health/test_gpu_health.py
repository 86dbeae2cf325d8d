"""Unit tests for gpu_health: host evaluation, Xid parsing, hysteresis and circuit breaker."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks as health_checks
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def gpu(index, **kw):
    out = {
        "index": index,
        "pci_bus_id": "00000000:%02X:00.0" % (0x17 + index),
        "ecc_errors": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
        "retired_pages_pending": False,
        "remapped_rows_failure": False,
        "temperature_c": 40,
    }
    out.update(kw)
    return out


def host(n=8, **overrides):
    gpus = [gpu(i) for i in range(n)]
    for index, kw in overrides.items():
        gpus[int(index[1:])].update(kw)
    return {"gpus": gpus}


def test_healthy_host():
    verdict = health_checks.evaluate_host(host(), expected_gpus=8)
    assert verdict["healthy"] is True
    assert verdict["problems"] == []
    assert verdict["remediation"] == "none"


def test_ecc_threshold_is_strictly_greater():
    at = health_checks.evaluate_host(host(g2={"ecc_errors": {"volatile_uncorrected": 10, "aggregate_uncorrected": 10}}))
    assert at["healthy"]
    over = health_checks.evaluate_host(host(g2={"ecc_errors": {"volatile_uncorrected": 11, "aggregate_uncorrected": 11}}))
    assert not over["healthy"]
    assert [p["check"] for p in over["problems"]] == ["ecc_uncorrected"]  # one problem per GPU
    assert over["problems"][0]["gpu"] == 2
    assert over["problems"][0]["threshold"] == 10
    assert over["remediation"] == "reset_gpu"


def test_ecc_threshold_configurable():
    facts = host(g0={"ecc_errors": {"volatile_uncorrected": 3, "aggregate_uncorrected": 3}})
    assert health_checks.evaluate_host(facts)["healthy"]
    assert not health_checks.evaluate_host(facts, policy={"ecc_error_threshold": 2})["healthy"]


def test_retired_pages_and_row_remap_failure():
    verdict = health_checks.evaluate_host(host(g1={"retired_pages_pending": True}, g3={"remapped_rows_failure": True}))
    checks = sorted((p["check"], p["gpu"]) for p in verdict["problems"])
    assert checks == [("remapped_rows_failure", 3), ("retired_pages_pending", 1)]
    assert verdict["remediation"] == "reboot"


def test_temperature_default_90():
    assert health_checks.evaluate_host(host(g0={"temperature_c": 90}))["healthy"]
    hot = health_checks.evaluate_host(host(g0={"temperature_c": 91}))
    assert hot["problems"][0]["check"] == "temperature"
    assert "91 C > 90 C" in hot["reason"]


def test_missing_gpus():
    verdict = health_checks.evaluate_host(host(7), expected_gpus=8)
    assert not verdict["healthy"]
    assert verdict["problems"][0]["check"] == "gpus_missing"
    assert verdict["reason"] == "7 of 8 GPUs visible"
    assert health_checks.evaluate_host(host(7), expected_gpus=None)["healthy"]


KLOG = """\
2026-12-02T10:00:00+0000 node kernel: NVRM: Xid (PCI:0000:19:00): 13, pid=4242, name=python, Graphics Exception
2026-12-02T10:01:00+0000 node kernel: NVRM: Xid (PCI:0000:1a:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
[ 1234.567890] NVRM: Xid (PCI:0000:17:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected.
[ 1234.600000] NVRM: Xid (PCI:0000:17:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected.
some unrelated line
[ 1300.000000] NVRM: Xid (PCI:0000:18:00): 999, unknown thing
"""


def test_parse_xids():
    events = health_checks.parse_xids(KLOG)
    assert [e["xid"] for e in events] == [13, 79, 48, 48, 999]
    assert events[0]["timestamp"] == "2026-12-02T10:00:00+0000"
    assert events[2]["timestamp"] == pytest.approx(1234.56789)
    assert events[1]["pci_bus_id"] == "0000:1a:00"
    assert [e["action"] for e in events] == ["ignore", "reboot", "reset_gpu", "reset_gpu", "drain"]


def test_xids_in_verdict_map_to_gpu_and_dedupe():
    verdict = health_checks.evaluate_host(host(), expected_gpus=8, kernel_log=KLOG)
    xids = [(p["value"], p["gpu"]) for p in verdict["problems"] if p["check"] == "xid"]
    # 13 ignored (application), 48 reported once, unknown 999 drains by default
    assert xids == [(79, 3), (48, 0), (999, 1)]
    assert verdict["remediation"] == "reboot"


def test_xid_policy_overrides():
    policy = {"xid_actions": {"999": "ignore"}, "xid_ignore": [13, 79]}
    verdict = health_checks.evaluate_host(host(), kernel_log=KLOG, policy=policy)
    assert [p["value"] for p in verdict["problems"]] == [48]


def test_bad_policy_names_valid_values():
    with pytest.raises(GpuOpsError, match="must be one of ignore, drain, reset_gpu, reboot"):
        health_checks.evaluate_host(host(), policy={"xid_actions": {48: "panic"}})
    with pytest.raises(GpuOpsError, match="temperature_threshold_c must be a number"):
        health_checks.evaluate_host(host(), policy={"temperature_threshold_c": "hot"})


def node(name, unschedulable=False, annotations=None, labels=None, taints=None):
    return {"metadata": {"name": name, "annotations": annotations or {}, "labels": labels or {}},
            "spec": {"unschedulable": unschedulable, "taints": taints or []}}


HEALTHY = {"healthy": True, "problems": [], "reason": "", "remediation": "none"}


def sick(reason="GPU 0: Xid 79"):
    return {"healthy": False, "problems": [{"check": "xid", "detail": reason}], "reason": reason,
            "remediation": "reboot"}


def by_node(plan):
    return {a["node"]: a for a in plan["actions"]}


def test_cordon_patch_and_dry_run_default():
    nodes = [node("n%d" % i) for i in range(4)]
    plan = health_checks.plan_actions({"n0": HEALTHY, "n1": sick(), "n2": HEALTHY, "n3": HEALTHY}, nodes,
                                      {"max_unhealthy_fraction": 0.5}, now="2026-12-02T10:00:00Z")
    acts = by_node(plan)
    assert plan["dry_run"] is True
    assert acts["n1"]["action"] == "cordon"
    assert acts["n1"]["applied"] is False
    patch = acts["n1"]["patch"]
    assert patch["spec"]["unschedulable"] is True
    assert patch["spec"]["taints"] == [health_checks.DEFAULT_TAINT]
    assert patch["metadata"]["annotations"][health_checks.ANN_REASON] == "GPU 0: Xid 79"
    assert patch["metadata"]["annotations"][health_checks.ANN_CORDONED_BY] == health_checks.CORDONED_BY_VALUE
    assert [a for a in acts if acts[a]["action"] != "none"] == ["n1"]


def test_cordon_keeps_foreign_taints():
    other = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    plan = health_checks.plan_actions({"n0": sick()}, [node("n0", taints=[other]), node("n1"), node("n2"), node("n3")],
                                      {"dry_run": False, "max_unhealthy_fraction": 0.5})
    patch = by_node(plan)["n0"]["patch"]
    assert patch["spec"]["taints"] == [other, health_checks.DEFAULT_TAINT]
    assert by_node(plan)["n0"]["applied"] is True


def quarantined(name, streak=0):
    return node(name, unschedulable=True, taints=[dict(health_checks.DEFAULT_TAINT)],
                annotations={health_checks.ANN_CORDONED_BY: health_checks.CORDONED_BY_VALUE, health_checks.ANN_STREAK: str(streak),
                             health_checks.ANN_REASON: "old"})


def test_hysteresis_waits_then_uncordons():
    policy = {"uncordon_after": 3, "dry_run": False}
    plan = health_checks.plan_actions({"n0": HEALTHY}, [quarantined("n0", 0)], policy)
    a = by_node(plan)["n0"]
    assert a["action"] == "wait"
    assert a["patch"] == {"metadata": {"annotations": {health_checks.ANN_STREAK: "1"}}}
    plan = health_checks.plan_actions({"n0": HEALTHY}, [quarantined("n0", 2)], policy)
    a = by_node(plan)["n0"]
    assert a["action"] == "uncordon"
    assert a["patch"]["spec"] == {"unschedulable": None, "taints": None}
    assert a["patch"]["metadata"]["annotations"][health_checks.ANN_CORDONED_BY] is None


def test_relapse_resets_streak():
    plan = health_checks.plan_actions({"n0": sick("new")}, [quarantined("n0", 2)], {})
    a = by_node(plan)["n0"]
    assert a["action"] == "keep"
    assert a["patch"]["metadata"]["annotations"] == {health_checks.ANN_STREAK: "0", health_checks.ANN_REASON: "new"}


def test_keep_is_idempotent():
    n = quarantined("n0", 0)
    n["metadata"]["annotations"][health_checks.ANN_REASON] = "same"
    plan = health_checks.plan_actions({"n0": sick("same")}, [n], {})
    assert by_node(plan)["n0"]["patch"] is None
    assert plan["changed"] is False


def test_manual_cordon_is_respected():
    nodes = [node("n0", unschedulable=True), node("n1", unschedulable=True)]
    plan = health_checks.plan_actions({"n0": HEALTHY, "n1": sick()}, nodes, {})
    acts = by_node(plan)
    assert acts["n0"]["action"] == "none" and acts["n0"]["patch"] is None  # never uncordon a manual cordon
    assert acts["n1"]["action"] == "none" and "someone else" in acts["n1"]["reason"]


def test_opt_out_label():
    plan = health_checks.plan_actions({"n0": sick()}, [node("n0", labels={health_checks.LABEL_OPT_OUT: "false"})], {})
    assert by_node(plan)["n0"]["action"] == "none"


def test_circuit_breaker_limits_quarantine():
    nodes = [node("n%d" % i) for i in range(8)]
    verdicts = {"n%d" % i: sick() for i in range(5)}
    verdicts.update({"n%d" % i: HEALTHY for i in range(5, 8)})
    plan = health_checks.plan_actions(verdicts, nodes, {"max_unhealthy_fraction": 0.25})
    acts = by_node(plan)
    assert [n for n in sorted(acts) if acts[n]["action"] == "cordon"] == ["n0", "n1"]
    assert [n for n in sorted(acts) if acts[n]["action"] == "blocked"] == ["n2", "n3", "n4"]
    assert all(acts[n]["patch"] is None for n in ("n2", "n3", "n4"))
    assert plan["breaker"]["open"] is True
    assert plan["breaker"]["limit"] == 2


def test_circuit_breaker_counts_existing_quarantine():
    nodes = [quarantined("n0"), quarantined("n1")] + [node("n%d" % i) for i in range(2, 8)]
    plan = health_checks.plan_actions({"n0": sick(), "n1": sick(), "n2": sick()}, nodes, {"max_unhealthy_fraction": 0.25})
    assert by_node(plan)["n2"]["action"] == "blocked"


def test_auto_cordon_off_reports_only():
    plan = health_checks.plan_actions({"n0": sick()}, [node("n0")], {"auto_cordon": False, "max_unhealthy_fraction": 1})
    assert by_node(plan)["n0"]["action"] == "report"
    assert by_node(plan)["n0"]["patch"] is None


def test_unknown_node_in_verdicts():
    with pytest.raises(GpuOpsError, match="not in the node list: ghost"):
        health_checks.plan_actions({"ghost": HEALTHY}, [node("n0")], {})


@pytest.mark.parametrize("policy,msg", [
    ({"uncordon_after": 0}, "uncordon_after must be >= 1"),
    ({"max_unhealthy_fraction": 1.5}, "between 0 and 1"),
    ({"taint": {"key": "x", "effect": "Sometimes"}}, "NoSchedule, PreferNoSchedule or NoExecute"),
])
def test_bad_plan_policy(policy, msg):
    with pytest.raises(GpuOpsError, match=msg):
        health_checks.plan_actions({}, [node("n0")], policy)


def test_recent_log_window():
    text = ("2026-12-02T10:00:00+0000 k: NVRM: Xid (PCI:0000:17:00): 48, old\n"
            "2026-12-02T10:59:30Z k: NVRM: Xid (PCI:0000:18:00): 48, new\n"
            "[ 5.0] NVRM: Xid (PCI:0000:19:00): 48, no wall clock\n")
    now = health_checks._parse_iso("2026-12-02T11:00:00+00:00")
    kept = health_checks.recent_log(text, now, 600)
    assert [e["pci_bus_id"] for e in health_checks.parse_xids(kept)] == ["0000:18:00", "0000:19:00"]
    assert health_checks.recent_log(text, now, 0) == text


def test_run_health_check_file_source(tmp_path):
    log = tmp_path / "kmsg"
    log.write_text("NVRM: Xid (PCI:0000:17:00): 95, pid=1, Uncontained ECC error\n")
    params = {"gpus": host(2)["gpus"], "expected_gpus": 2, "kernel_log_path": str(log),
              "kernel_log_source": "auto", "xid_window": 0, "temperature_threshold_c": 90,
              "ecc_error_threshold": 10}
    calls = []
    verdict = health_checks.run_health_check(params, calls.append, lambda p: True, 0)
    assert calls == []  # the file was read, no command ran
    assert verdict["kernel_log_source"] == "file"
    assert [p["value"] for p in verdict["problems"]] == [95]


def test_run_health_check_journal_then_dmesg():
    calls = []

    def run(argv):
        calls.append(argv[0])
        if argv[0] == "journalctl":
            return 2, "", "no journal"
        return 0, "2026-12-02T10:00:00+00:00 NVRM: Xid (PCI:0000:17:00): 79, gone\n", ""

    params = {"gpus": host(1)["gpus"], "kernel_log_source": "auto", "xid_window": 0}
    verdict = health_checks.run_health_check(params, run, lambda p: p.endswith("journalctl"), 0)
    assert calls == ["journalctl", "dmesg"]
    assert verdict["kernel_log_source"] == "dmesg"
    assert verdict["remediation"] == "reboot"


def test_run_health_check_reads_facts_when_not_given():
    seen = {}

    def read(sim):
        seen["sim"] = sim
        return host(1, g0={"temperature_c": 99})

    verdict = health_checks.run_health_check({"simulator": "/x.json", "kernel_log_source": "none"}, None, None, 0, read)
    assert seen == {"sim": "/x.json"}
    assert verdict["problems"][0]["check"] == "temperature"
