# -*- coding: utf-8 -*-
"""health/checks.py through its public functions, rule by rule (make mutate's survivors, docs/testing.md): what an
Xid means (NVIDIA's Xid catalog and memory-error docs, /work/shared/reference/k8s-gpu-stack.md section 7.2), how
kernel log lines are read, the policy's checks and error messages, the strongest remediation, the time window of
the log (ISO stamps without a zone are UTC) and where the kernel log comes from. Expected values worked out by hand
from those rules; 1_800_000_000 s is 2027-01-15T08:00:00Z."""
import time

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def _gpu(index, bus="00000000:17:00.0", **kw):
    out = {"index": index, "pci_bus_id": bus, "ecc_errors": {"volatile_uncorrected": 0, "aggregate_uncorrected": 0},
           "retired_pages_pending": False, "remapped_rows_failure": False, "temperature_c": 40}
    out.update(kw)
    return out


@pytest.mark.parametrize("xid, action", [
    (46, "reset_gpu"),  # GPU stopped processing: NVIDIA Health Validation, drain then reset_gpu
    (48, "reset_gpu"),  # double bit ECC error: drain then reset_gpu
    (63, "reset_gpu"),  # row remapping pending: "reset gpu to activate"
    (64, "reset_gpu"),  # page retirement / row remap failure
    (95, "reset_gpu"),  # uncontained ECC error
    (79, "reboot"),     # GPU has fallen off the bus
    (13, "ignore"), (31, "ignore"), (43, "ignore"),  # application faults: the workload, not the node
    (999, "drain"),     # an Xid of no bucket: the default unknown action
])
def test_what_an_xid_calls_for_by_default(xid, action):
    assert checks.xid_action(xid) == action


def test_policy_overrides_come_before_the_ignore_list_and_the_table():
    assert checks.xid_action(13, {"xid_actions": {13: "reboot"}}) == "reboot"
    assert checks.xid_action(79, {"xid_actions": {"79": "drain"}}) == "drain"
    assert checks.xid_action(79, {"xid_ignore": [79]}) == "ignore"
    for xid in (13, 31, 43, 45, 68, 109):  # application faults: the table says so too, ignore list or not
        assert checks.xid_action(xid, {"xid_ignore": []}) == "ignore", xid
    assert checks.xid_action(999, {"xid_unknown_action": "reboot"}) == "reboot"
    assert checks.xid_action(48, {"xid_unknown_action": "ignore"}) == "reset_gpu"


def test_kernel_log_lines_are_read_with_their_timestamps():
    text = "\n".join([
        "2026-12-07T10:00:00+0000 gpu1 kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=123, GPU has fallen off the bus.",
        "NVRM: Xid is not a line this parser knows",
        "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', An uncorrectable double bit error",
        "kernel: something else entirely",
        "  NVRM: Xid (0000:18:00): 13  ",
    ])
    events = checks.parse_xids(text)
    assert events == [
        {"xid": 79, "pci_bus_id": "0000:17:00", "timestamp": "2026-12-07T10:00:00+0000",
         "message": "pid=123, GPU has fallen off the bus.", "action": "reboot",
         "line": "2026-12-07T10:00:00+0000 gpu1 kernel: NVRM: Xid (PCI:0000:17:00): 79, pid=123, GPU has fallen off "
                 "the bus."},
        {"xid": 48, "pci_bus_id": "0000:3b:00", "timestamp": 1234.56789,
         "message": "pid='<unknown>', An uncorrectable double bit error", "action": "reset_gpu",
         "line": "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 48, pid='<unknown>', An uncorrectable double bit error"},
        {"xid": 13, "pci_bus_id": "0000:18:00", "timestamp": None, "message": "", "action": "ignore",
         "line": "NVRM: Xid (0000:18:00): 13"}]
    assert checks.parse_xids(None) == []


@pytest.mark.parametrize("policy, message", [
    ({"temperature_threshold_c": -1}, "temperature_threshold_c must be a number >= 0, got -1"),
    ({"ecc_error_threshold": -0.5}, "ecc_error_threshold must be a number >= 0, got -0.5"),
    ({"ecc_error_threshold": True}, "ecc_error_threshold must be a number >= 0, got True"),
    ({"temperature_threshold_c": "90"}, "temperature_threshold_c must be a number >= 0, got '90'"),
    ({"xid_unknown_action": "explode"},
     "xid_unknown_action must be one of ignore, drain, reset_gpu, reboot, got 'explode'"),
    ({"xid_actions": {"abc": "drain"}}, "xid_actions keys must be Xid numbers, got 'abc'"),
    ({"xid_actions": {None: "drain"}}, "xid_actions keys must be Xid numbers, got None"),
    ({"xid_actions": {79: "explode"}}, "xid_actions[79] must be one of ignore, drain, reset_gpu, reboot, got 'explode'"),
])
def test_bad_policy_names_what_is_valid(policy, message):
    with pytest.raises(GpuOpsError) as err:
        checks.validate_policy(policy)
    assert str(err.value) == message


def test_policy_defaults():
    """Documented defaults (doc fragment gpuops.k8s.health_policy): 90 C, 10 uncorrected ECC errors, the
    application Xids ignored, an unknown Xid drains."""
    assert checks.validate_policy({}) == {"temperature_threshold_c": 90, "ecc_error_threshold": 10,
                                          "xid_ignore": [13, 31, 43, 45, 68, 109], "xid_unknown_action": "drain",
                                          "xid_actions": {}}


def test_policy_merges_over_the_defaults():
    merged = checks.validate_policy({"temperature_threshold_c": None, "ecc_error_threshold": 0,
                                     "xid_actions": {"79": "drain"}, "xid_ignore": ["13", 31]})
    assert merged == {"temperature_threshold_c": 90, "ecc_error_threshold": 0, "xid_unknown_action": "drain",
                      "xid_actions": {79: "drain"}, "xid_ignore": [13, 31]}


def test_ecc_one_problem_per_gpu_naming_the_counter_over_the_threshold():
    facts = {"gpus": [_gpu(0, ecc_errors={"volatile_uncorrected": 11, "aggregate_uncorrected": 50}),
                      _gpu(1, bus="00000000:18:00.0", ecc_errors={"volatile_uncorrected": 2,
                                                                  "aggregate_uncorrected": 12}),
                      _gpu(2, bus="00000000:19:00.0", ecc_errors={"volatile_uncorrected": 10})]}
    v = checks.evaluate_host(facts)
    assert v["problems"] == [
        {"check": "ecc_uncorrected", "detail": "GPU 0: volatile uncorrected ECC errors 11 > 10", "gpu": 0,
         "action": "reset_gpu", "value": 11, "threshold": 10},
        {"check": "ecc_uncorrected", "detail": "GPU 1: aggregate uncorrected ECC errors 12 > 10", "gpu": 1,
         "action": "reset_gpu", "value": 12, "threshold": 10}]
    assert v["remediation"] == "reset_gpu" and v["reason"] == ("GPU 0: volatile uncorrected ECC errors 11 > 10; "
                                                               "GPU 1: aggregate uncorrected ECC errors 12 > 10")


def test_the_strongest_action_wins_in_any_order():
    hot = dict(temperature_c=95)  # drain
    pending_pages = dict(retired_pages_pending=True)  # reset_gpu
    remap_failed = dict(remapped_rows_failure=True)  # reboot
    for kws, want in (([hot], "drain"), ([hot, pending_pages], "reset_gpu"), ([pending_pages, hot], "reset_gpu"),
                      ([remap_failed, hot, pending_pages], "reboot"), ([hot, remap_failed], "reboot")):
        gpus = [_gpu(i, bus="00000000:%02x:00.0" % (0x17 + i), **kw) for i, kw in enumerate(kws)]
        assert checks.evaluate_host({"gpus": gpus})["remediation"] == want, kws
    v = checks.evaluate_host({"gpus": [_gpu(0)]}, expected_gpus=1)
    assert (v["healthy"], v["remediation"], v["reason"], v["problems"]) == (True, "none", "", [])


def test_xid_problems_find_their_gpu_by_bus_once_per_xid_and_bus():
    """NVML's 00000000:3B:00.0 is the kernel's 0000:3b:00; Xid 13 (application) is listed, not a problem."""
    facts = {"gpus": [_gpu(0, bus="00000000:3B:00.0")]}
    log = "\n".join(["NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE",
                     "NVRM: Xid (PCI:0000:3b:00): 48, pid=2, DBE",
                     "NVRM: Xid (PCI:0000:3b:00): 13, pid=3, app",
                     "NVRM: Xid (PCI:0000:99:00): 79",
                     "NVRM: Xid (PCI:0000:3b:00): 79, gone"])
    v = checks.evaluate_host(facts, kernel_log=log)
    assert [(p["detail"], p["gpu"], p["action"], p["value"]) for p in v["problems"]] == [
        ("GPU 0: Xid 48 (pid=1, DBE)", 0, "reset_gpu", 48),
        ("PCI 0000:99:00: Xid 79", None, "reboot", 79),
        ("GPU 0: Xid 79 (gone)", 0, "reboot", 79)]
    assert len(v["xids"]) == 5 and v["remediation"] == "reboot"


def test_missing_gpus_only_when_fewer_than_expected():
    assert checks.evaluate_host({"gpus": [_gpu(0)]}, expected_gpus=1)["healthy"] is True
    assert checks.evaluate_host({"gpus": [_gpu(0), _gpu(1, bus="00000000:18:00.0")]}, expected_gpus=1)["healthy"]
    v = checks.evaluate_host({"gpus": [_gpu(0)]}, expected_gpus=2)
    assert v["problems"] == [{"check": "gpus_missing", "detail": "1 of 2 GPUs visible", "gpu": None,
                              "action": "reboot", "value": 1, "threshold": 2}]


def _node(name, annotations=None, unschedulable=False):
    return {"metadata": {"name": name, "annotations": annotations or {}, "labels": {}},
            "spec": {"unschedulable": unschedulable}}


def _healthy():
    return {"healthy": True, "problems": [], "reason": "", "remediation": "none"}


def test_an_unreadable_streak_counts_as_zero():
    node = _node("a", {checks.ANN_CORDONED_BY: checks.CORDONED_BY_VALUE, checks.ANN_STREAK: "many"}, True)
    out = checks.plan_actions({"a": _healthy()}, [node], {"uncordon_after": 2})
    assert out["actions"][0]["action"] == "wait" and out["actions"][0]["reason"] == "healthy 1 of 2 checks before uncordon"


def test_alerts_raise_the_remediation_to_their_strongest_action():
    """A healthy verdict plus firing alerts of drain, reset_gpu, reboot, drain: unhealthy, reboot, the reasons in
    key order; without the reboot one, reset_gpu."""
    alerts = {"a": [{"accepted": True, "status": "firing", "key": "k%d" % i,
                     "problem": {"check": "alert", "detail": "%s me" % action, "action": action}}
                    for i, action in enumerate(("drain", "reset_gpu", "reboot"))]}
    alerts["a"].append({"accepted": True, "status": "firing", "key": "k3",
                        "problem": {"check": "alert", "detail": "drain again", "action": "drain"}})
    out = checks.plan_actions({"a": _healthy()}, [_node("a"), _node("b"), _node("c"), _node("d")],
                              {"max_unhealthy_fraction": 0.25}, alerts=alerts)
    act = out["actions"][0]
    assert (act["action"], act["remediation"], act["reason"]) == (
        "cordon", "reboot", "drain me; reset_gpu me; reboot me; drain again")
    alerts["a"] = alerts["a"][:2]
    out = checks.plan_actions({"a": _healthy()}, [_node("a")], {"max_unhealthy_fraction": 1}, alerts=alerts)
    assert out["actions"][0]["remediation"] == "reset_gpu"


def _ours(name, streak="0", reason="old", alerts=None, taints=None):
    ann = {checks.ANN_CORDONED_BY: checks.CORDONED_BY_VALUE, checks.ANN_STREAK: streak, checks.ANN_REASON: reason}
    if alerts is not None:
        ann[checks.ANN_ALERTS] = alerts
    node = _node(name, ann, True)
    node["spec"]["taints"] = taints or []
    return node


def test_a_resolved_alert_releases_the_node_it_held():
    """The node is held by alert k1 (recorded on it); k1 resolves and the host is healthy: the first healthy check
    of the hysteresis, the record cleared."""
    held = _ours("a", alerts='{"k1": {"action": "drain", "check": "alert", "detail": "hot"}}')
    resolved = {"a": [{"accepted": True, "status": "resolved", "key": "k1",
                       "problem": {"action": "drain", "check": "alert", "detail": "hot"}}]}
    act = checks.plan_actions({"a": _healthy()}, [held], {"uncordon_after": 3}, alerts=resolved)["actions"][0]
    assert (act["action"], act["reason"]) == ("wait", "healthy 1 of 3 checks before uncordon")
    assert act["patch"] == {"metadata": {"annotations": {checks.ANN_STREAK: "1", checks.ANN_ALERTS: None}}}


def test_a_held_node_gets_its_new_reason_written():
    sick = {"healthy": False, "problems": [{"detail": "new", "action": "drain"}], "reason": "new",
            "remediation": "drain"}
    act = checks.plan_actions({"a": sick}, [_ours("a", reason="old")], {})["actions"][0]
    assert act["action"] == "keep"
    assert act["patch"] == {"metadata": {"annotations": {checks.ANN_STREAK: "0", checks.ANN_REASON: "new"}}}


def test_uncordon_removes_only_our_taint_and_records_when():
    ours = dict(checks.DEFAULT_TAINT)
    softer = {"key": ours["key"], "value": "fatal", "effect": "PreferNoSchedule"}  # same key, another effect
    other = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    node = _ours("a", streak="2", taints=[ours, softer, other])
    act = checks.plan_actions({"a": _healthy()}, [node], {"uncordon_after": 3}, now="2027-01-15T08:00:00Z")
    act = act["actions"][0]
    assert act["action"] == "uncordon" and act["reason"] == "healthy for 3 checks in a row (needed 3)"
    assert act["patch"]["spec"] == {"unschedulable": None, "taints": [softer, other]}
    assert act["patch"]["metadata"]["annotations"][checks.ANN_UNCORDONED_AT] == "2027-01-15T08:00:00Z"


def test_breaker_fraction_bounds():
    """0 is a valid fraction (never quarantine: the cordon is blocked); above 1 or uncordon_after 0 is refused."""
    sick = {"healthy": False, "problems": [{"detail": "x", "action": "drain"}], "reason": "x", "remediation": "drain"}
    out = checks.plan_actions({"a": sick}, [_node("a"), _node("b")], {"max_unhealthy_fraction": 0})
    assert out["actions"][0]["action"] == "blocked" and out["breaker"]["limit"] == 0
    out = checks.plan_actions({"a": sick}, [_node("a"), _node("b")], {"max_unhealthy_fraction": 1})
    assert out["actions"][0]["action"] == "cordon" and out["breaker"]["limit"] == 2
    with pytest.raises(GpuOpsError, match="max_unhealthy_fraction must be between 0 and 1, got 1.5"):
        checks.plan_actions({}, [], {"max_unhealthy_fraction": 1.5})
    with pytest.raises(GpuOpsError, match="uncordon_after must be >= 1, got 0"):
        checks.plan_actions({}, [], {"uncordon_after": 0})


@pytest.fixture
def tokyo(monkeypatch):
    """A host whose local time is UTC+9, to tell a UTC reading of a stamp from a local one."""
    monkeypatch.setenv("TZ", "JST-9")  # POSIX form: needs no tz database
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_recent_log_keeps_lines_within_the_window(tokyo):
    lines = ["2027-01-15T07:50:00+00:00 old: 600 s before now",
             "2027-01-15T07:50:00Z old too, Z form",
             "2027-01-15T08:59:30+01:00 recent: 30 s before now",
             "2027-01-15T07:58:00,123456Z recent: 120 s before now, comma fraction",
             "2027-01-15T07:58:00 no zone: UTC, 120 s before now (as Tokyo time it would be 9 h old)",
             "2027-13-45T99:99:99Z unreadable: kept",
             "no stamp: kept"]
    kept = checks.recent_log("\n".join(lines), NOW, 300).splitlines()
    assert kept == lines[2:]
    assert checks.recent_log("\n".join(lines), NOW, 0) == "\n".join(lines)
    assert checks.recent_log("", NOW, 300) == ""


def _runner(answers):
    calls = []

    def run(argv):
        calls.append(argv)
        return answers[argv[0]]
    return run, calls


def test_journal_is_asked_for_the_window_and_its_empty_answer_is_no_xid():
    run, calls = _runner({"journalctl": (1, "  \n", ""), "dmesg": (0, "dmesg text", "")})
    assert checks.read_kernel_log({"kernel_log_source": "auto", "xid_window": 600}, run, lambda p: True) == (
        "  \n", "journal")
    assert calls == [["journalctl", "-k", "--no-pager", "-o", "short-iso", "--grep", "NVRM: Xid", "--since", "-600s"]]
    run, calls = _runner({"journalctl": (0, "journal text", "")})
    assert checks.read_kernel_log({"kernel_log_source": "journal"}, run, lambda p: False) == ("journal text", "journal")
    assert calls == [["journalctl", "-k", "--no-pager", "-o", "short-iso", "--grep", "NVRM: Xid"]]


def test_kernel_log_sources_and_their_errors(tmp_path):
    # rc 1 with output is a failure: auto falls back to dmesg, journal fails with journalctl's error
    run, calls = _runner({"journalctl": (1, "partial", "oops"), "dmesg": (0, "dmesg text", "")})
    assert checks.read_kernel_log({}, run, lambda p: p == "/bin/journalctl") == ("dmesg text", "dmesg")
    assert [c[0] for c in calls] == ["journalctl", "dmesg"]
    run, dummy = _runner({"journalctl": (2, "", " no journal \n")})
    with pytest.raises(GpuOpsError) as err:
        checks.read_kernel_log({"kernel_log_source": "journal"}, run, lambda p: True)
    assert str(err.value) == "journalctl -k failed (rc 2): no journal"
    run, dummy = _runner({"dmesg": (-9, "", "killed")})
    with pytest.raises(GpuOpsError, match=r"dmesg failed \(rc -9\): killed"):
        checks.read_kernel_log({"kernel_log_source": "dmesg"}, run, lambda p: True)
    run, dummy = _runner({"dmesg": (1, "", "Operation not permitted\n")})
    with pytest.raises(GpuOpsError) as err:
        checks.read_kernel_log({"kernel_log_source": "dmesg"}, run, lambda p: True)
    assert str(err.value) == ("cannot read the kernel log: dmesg failed (rc 1): Operation not permitted. Run as root, "
                              "or set kernel_log_source=none to skip the Xid check")
    assert checks.read_kernel_log({"kernel_log": "inline text", "kernel_log_source": "none"}, None, None) == (
        "inline text", "inline")
    assert checks.read_kernel_log({"kernel_log_source": "none"}, None, None) == ("", "none")
    assert checks.read_kernel_log({"kernel_log_source": "file", "kernel_log_path": str(tmp_path / "absent")}, None,
                                  lambda p: False) == ("", "file (absent)")
    with pytest.raises(GpuOpsError, match="kernel_log_source=file needs kernel_log_path"):
        checks.read_kernel_log({"kernel_log_source": "file"}, None, None)


def test_no_window_keeps_every_xid_whatever_its_age():
    old = "2020-01-01T00:00:00+00:00 NVRM: Xid (PCI:0000:17:00): 79, gone"
    v = checks.run_health_check({"gpus": [_gpu(0)], "kernel_log": old, "xid_window": None}, None, None, NOW)
    assert [p["value"] for p in v["problems"]] == [79] and v["kernel_log_source"] == "inline"
    v = checks.run_health_check({"gpus": [_gpu(0)], "kernel_log": old, "xid_window": 3600}, None, None, NOW)
    assert v["problems"] == []


def test_hysteresis_defaults_to_three_checks_and_uncordons_past_a_lowered_count():
    act = checks.plan_actions({"a": _healthy()}, [_ours("a", streak="1")], {})["actions"][0]
    assert (act["action"], act["reason"]) == ("wait", "healthy 2 of 3 checks before uncordon")
    act = checks.plan_actions({"a": _healthy()}, [_ours("a", streak="2")], {})["actions"][0]
    assert (act["action"], act["reason"]) == ("uncordon", "healthy for 3 checks in a row (needed 3)")
    # the policy lowered to 2 while the streak was already at 5: uncordon now
    act = checks.plan_actions({"a": _healthy()}, [_ours("a", streak="5")], {"uncordon_after": 2})["actions"][0]
    assert (act["action"], act["reason"]) == ("uncordon", "healthy for 6 checks in a row (needed 2)")


def test_a_relapse_resets_the_streak_even_with_the_same_reason():
    sick = {"healthy": False, "problems": [{"detail": "old", "action": "drain"}], "reason": "old",
            "remediation": "drain"}
    act = checks.plan_actions({"a": sick}, [_ours("a", streak="2", reason="old")], {})["actions"][0]
    assert act["action"] == "keep"
    assert act["patch"] == {"metadata": {"annotations": {checks.ANN_STREAK: "0", checks.ANN_REASON: "old"}}}
    act = checks.plan_actions({"a": sick}, [_ours("a", streak="0", reason="old")], {})["actions"][0]
    assert act["action"] == "keep" and act["patch"] is None


def test_every_node_gets_an_action_and_the_summary_counts_them():
    """Node a has no verdict (host not reached) and sorts first: b and c still get theirs."""
    sick = {"healthy": False, "problems": [{"detail": "x", "action": "drain"}], "reason": "x", "remediation": "drain"}
    out = checks.plan_actions({"b": _healthy(), "c": sick}, [_node("a"), _node("b"), _node("c")],
                              {"max_unhealthy_fraction": 0.5})
    assert [(a["node"], a["action"], a["reason"]) for a in out["actions"]] == [
        ("a", "none", "no health data (host not checked)"), ("b", "none", "healthy"), ("c", "cordon", "x")]
    assert out["summary"] == {"none": 2, "cordon": 1}


def test_the_alerts_recorded_on_a_cordoned_node_are_sorted_json():
    alerts = {"a": [{"accepted": True, "status": "firing", "key": key,
                     "problem": {"detail": "d" + key, "action": "drain", "check": "alert"}} for key in ("k2", "k1")]}
    act = checks.plan_actions({"a": _healthy()}, [_node("a")], {"max_unhealthy_fraction": 1}, alerts=alerts)
    act = act["actions"][0]
    assert act["action"] == "cordon"
    assert act["patch"]["metadata"]["annotations"][checks.ANN_ALERTS] == (
        '{"k1": {"action": "drain", "check": "alert", "detail": "dk1"}, '
        '"k2": {"action": "drain", "check": "alert", "detail": "dk2"}}')


def test_auto_uses_journalctl_only_where_it_is_installed():
    run, calls = _runner({"journalctl": (0, "j", ""), "dmesg": (0, "d", "")})
    assert checks.read_kernel_log({}, run, lambda p: False) == ("d", "dmesg") and [c[0] for c in calls] == ["dmesg"]
    run, calls = _runner({"journalctl": (0, "j", ""), "dmesg": (0, "d", "")})
    assert checks.read_kernel_log({}, run, lambda p: p == "/usr/bin/journalctl") == ("j", "journal")
    run, dummy = _runner({"journalctl": (-9, "", "killed")})
    with pytest.raises(GpuOpsError, match=r"journalctl -k failed \(rc -9\): killed"):
        checks.read_kernel_log({"kernel_log_source": "journal"}, run, lambda p: True)


def test_xids_find_their_gpu_across_pci_domains():
    """Two GPUs on bus 17 of PCI domains 1 and 2: an Xid names its domain, so it lands on the right GPU."""
    facts = {"gpus": [_gpu(0, bus="00000001:17:00.0"), _gpu(1, bus="00000002:17:00.0")]}
    v = checks.evaluate_host(facts, kernel_log="NVRM: Xid (PCI:0001:17:00): 79, gone")
    assert [(p["gpu"], p["detail"]) for p in v["problems"]] == [(0, "GPU 0: Xid 79 (gone)")]


def test_only_the_value_false_opts_a_node_out():
    sick = {"healthy": False, "problems": [{"detail": "x", "action": "drain"}], "reason": "x", "remediation": "drain"}
    for value, action in (("false", "none"), ("False", "none"), ("disabled", "cordon"), ("true", "cordon")):
        node = _node("a")
        node["metadata"]["labels"][checks.LABEL_OPT_OUT] = value
        out = checks.plan_actions({"a": sick}, [node], {"max_unhealthy_fraction": 1})
        assert out["actions"][0]["action"] == action, value


def test_alerts_add_to_the_problems_of_the_check():
    sick = {"healthy": False, "problems": [{"detail": "hot", "action": "drain"}], "reason": "hot",
            "remediation": "drain"}
    alerts = {"a": [{"accepted": True, "status": "firing", "key": "k", "problem": {"detail": "ecc", "action": "drain"}}]}
    act = checks.plan_actions({"a": sick}, [_node("a")], {"max_unhealthy_fraction": 1}, alerts=alerts)["actions"][0]
    assert (act["reason"], act["remediation"]) == ("hot; ecc", "drain")
    act = checks.plan_actions({"a": _healthy()}, [_node("a")], {"max_unhealthy_fraction": 1}, alerts=alerts)
    assert (act["actions"][0]["reason"], act["actions"][0]["remediation"]) == ("ecc", "drain")


def test_uncordon_keeps_taints_that_differ_in_key_or_effect():
    ours = dict(checks.DEFAULT_TAINT)
    keep = [{"key": ours["key"], "effect": "NoExecute"}, {"key": "zz.example.com/later", "effect": "NoSchedule"}]
    node = _ours("a", streak="2", taints=[ours] + keep)
    act = checks.plan_actions({"a": _healthy()}, [node], {})["actions"][0]
    assert act["action"] == "uncordon" and act["patch"]["spec"]["taints"] == keep


def test_xids_tell_devices_on_one_bus_apart_and_read_a_short_bus_id():
    facts = {"gpus": [_gpu(0, bus="00000000:17:01.0"), _gpu(1, bus="00000000:17:00.0")]}
    v = checks.evaluate_host(facts, kernel_log="NVRM: Xid (PCI:0000:17:01): 79, gone\nNVRM: Xid (PCI:17:00): 48, x")
    assert [p["detail"] for p in v["problems"]] == ["GPU 0: Xid 79 (gone)", "PCI 17:00: Xid 48 (x)"]


def test_breaker_and_hysteresis_bounds():
    act = checks.plan_actions({"a": _healthy()}, [_ours("a", streak="0")], {"uncordon_after": 1})["actions"][0]
    assert act["action"] == "uncordon"
    with pytest.raises(GpuOpsError, match="max_unhealthy_fraction must be between 0 and 1, got -0.5"):
        checks.plan_actions({}, [], {"max_unhealthy_fraction": -0.5})
    with pytest.raises(GpuOpsError) as err:
        checks.plan_actions({}, [_node("a")], {}, alerts={"zz": [{"accepted": True}]})
    assert str(err.value) == "alerts name nodes that are not in the GPU node pool (the node list): zz"
    with pytest.raises(GpuOpsError) as err:
        checks.plan_actions({}, [_node("a")], {"node_selector": "gpu=true"}, alerts={"zz": [{"accepted": True}]})
    assert str(err.value) == "alerts name nodes that are not in the GPU node pool (gpu=true): zz"


def test_an_alert_not_accepted_is_skipped_not_the_rest():
    alerts = {"a": [{"accepted": False, "status": "firing", "key": "k0", "problem": {"detail": "no", "action": "drain"}},
                    {"accepted": True, "status": "firing", "key": "k1", "problem": {"detail": "yes", "action": "drain"}}]}
    act = checks.plan_actions({"a": _healthy()}, [_node("a")], {"max_unhealthy_fraction": 1}, alerts=alerts)
    assert (act["actions"][0]["action"], act["actions"][0]["reason"]) == ("cordon", "yes")


def test_the_same_alerts_in_another_order_change_nothing_on_a_held_node():
    recorded = ('{"k1": {"action": "drain", "check": "alert", "detail": "d1"}, '
                '"k2": {"action": "drain", "check": "alert", "detail": "d2"}}')
    alerts = {"a": [{"accepted": True, "status": "firing", "key": k,
                     "problem": {"detail": "d" + k[1], "action": "drain", "check": "alert"}} for k in ("k2", "k1")]}
    act = checks.plan_actions({"a": _healthy()}, [_ours("a", reason="d1; d2", alerts=recorded)], {},
                              alerts=alerts)["actions"][0]
    assert act["action"] == "keep" and act["patch"] is None


def test_an_opted_out_node_is_reported_and_the_next_node_still_handled():
    sick = {"healthy": False, "problems": [{"detail": "x", "action": "drain"}], "reason": "x", "remediation": "drain"}
    out_node = _node("a")
    out_node["metadata"]["labels"][checks.LABEL_OPT_OUT] = "false"
    out = checks.plan_actions({"a": sick, "b": sick}, [out_node, _node("b")], {"max_unhealthy_fraction": 1})
    assert [(a["action"], a["reason"]) for a in out["actions"]] == [
        ("none", "opted out (gpuops.k8s/health.managed=false)"), ("cordon", "x")]


def test_a_new_reason_is_written_whichever_way_it_sorts():
    sick = {"healthy": False, "problems": [{"detail": "b-reason", "action": "drain"}], "reason": "b-reason",
            "remediation": "drain"}
    act = checks.plan_actions({"a": sick}, [_ours("a", reason="a-reason")], {})["actions"][0]
    assert act["patch"] == {"metadata": {"annotations": {checks.ANN_STREAK: "0", checks.ANN_REASON: "b-reason"}}}


def test_an_open_breaker_blocks_every_new_cordon_and_a_cordon_adds_our_taint_once():
    sick = {"healthy": False, "problems": [{"detail": "x", "action": "drain"}], "reason": "x", "remediation": "drain"}
    held = _ours("h", reason="x")  # already quarantined: 1 of 4 nodes, limit floor(4 x 0.25) = 1
    out = checks.plan_actions({"a": sick, "b": sick, "h": sick}, [_node("a"), _node("b"), _node("c"), held],
                              {"max_unhealthy_fraction": 0.25})
    assert [a["action"] for a in out["actions"]] == ["blocked", "blocked", "none", "keep"]
    # the limit lowered below the quarantined count (floor(4 x 0.2) = 0 < 1): still no new cordon
    out = checks.plan_actions({"a": sick, "b": sick, "h": sick}, [_node("a"), _node("b"), _node("c"), held],
                              {"max_unhealthy_fraction": 0.2})
    assert [a["action"] for a in out["actions"]] == ["blocked", "blocked", "none", "keep"]
    node = _node("a")
    node["spec"]["taints"] = [dict(checks.DEFAULT_TAINT)]
    act = checks.plan_actions({"a": sick}, [node], {"max_unhealthy_fraction": 1}, now="2027-01-15T08:00:00Z")
    patch = act["actions"][0]["patch"]
    assert patch["spec"]["taints"] == [checks.DEFAULT_TAINT]
    assert patch["metadata"]["annotations"][checks.ANN_SINCE] == "2027-01-15T08:00:00Z"


def test_the_window_keeps_its_boundary_and_stamps_ahead_of_the_clock():
    lines = ["2027-01-15T07:55:00+00:00 exactly 300 s old", "2027-01-15T08:10:00+00:00 ahead of this clock"]
    assert checks.recent_log("\n".join(lines), NOW, 300).splitlines() == lines


def test_a_path_does_not_turn_the_journal_into_a_file():
    run, calls = _runner({"journalctl": (0, "j", "")})
    assert checks.read_kernel_log({"kernel_log_source": "journal", "kernel_log_path": "/var/log/kern.log"}, run,
                                  lambda p: True) == ("j", "journal")
