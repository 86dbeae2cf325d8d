"""Unit tests for gpu_alerts (Alertmanager alerts as health evidence) and the alert path of plan_actions."""
import json

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.health import alerts as gpu_alerts
from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks as health_checks

HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]


def alert(node="gpu-1", status="firing", fp="fp1", **labels):
    lab = {"alertname": "GpuXidError", "gpu": "3", "xid": "79"}
    if node is not None:
        lab["node"] = node
    lab.update(labels)
    return {"status": status, "labels": lab, "annotations": {"value": lab.get("xid")}, "fingerprint": fp,
            "startsAt": "2026-12-03T10:00:00Z"}


def test_xid_79_becomes_the_problem_gpu_health_would_report():
    out = gpu_alerts.read_alert(alert(), HOSTS)
    assert out["accepted"] and out["node"] == "gpu-1" and out["host"] == "gpu-1" and out["key"] == "fp1"
    assert out["problem"] == {"check": "xid", "detail": "GPU 3: Xid 79 (alert GpuXidError)", "gpu": 3,
                              "action": "reboot", "source": "alert", "alert": "GpuXidError", "key": "fp1",
                              "value": 79, "since": "2026-12-03T10:00:00Z"}
    assert out["problem"]["action"] == health_checks.xid_action(79)


@pytest.mark.parametrize("bad,reason", [
    ("not a dict", "expected one Alertmanager alert"),
    ({"alerts": [], "status": "firing"}, "whole Alertmanager notification"),
    ({"status": "firing"}, "no labels object"),
    (dict(alert(), status="pending"), "status must be firing or resolved"),
    (alert(node=None), "without a node: none of the labels node, Hostname, hostname"),
    (alert(node="Bad_Name!"), "is not a Kubernetes node name"),
    (alert(node="gpu-99"), "unknown node gpu-99: not a host of the GPU pool inventory (4 hosts)"),
    (alert(alertname="KubePodCrashLooping"), "is not a GPU health alert"),
    (alert(xid="abc"), "value 'abc' is not a number"),
    (alert(xid="13"), "Xid 13 on gpu-1 is ignored by the gpu_health policy"),
])
def test_bad_alerts_are_dropped_with_a_reason(bad, reason):
    out = gpu_alerts.read_alert(bad, HOSTS)
    assert out["accepted"] is False and out["problem"] is None
    assert reason in out["reason"], out["reason"]


def test_node_label_fallbacks_and_node_names():
    lab = alert(node=None, Hostname="node-b")
    out = gpu_alerts.read_alert(lab, ["host-a", "host-b"], node_names={"host-b": "node-b"})
    assert out["accepted"] and (out["host"], out["node"]) == ("host-b", "node-b")
    assert gpu_alerts.read_alert(alert(node=None, hostname="gpu-2"), HOSTS)["node"] == "gpu-2"


def test_thresholds_and_overrides_are_the_health_checks():
    ecc = {"status": "firing", "labels": {"alertname": "GpuEccUncorrectedErrors", "node": "gpu-2", "gpu": "1"},
           "annotations": {"value": "10"}, "fingerprint": "e"}
    assert not gpu_alerts.read_alert(ecc, HOSTS)["accepted"]  # 10 is not over 10
    ecc["annotations"]["value"] = "11"
    out = gpu_alerts.read_alert(ecc, HOSTS)
    assert out["accepted"] and out["problem"]["action"] == "reset_gpu" and "11 > 10" in out["problem"]["detail"]
    assert not gpu_alerts.read_alert(ecc, HOSTS, policy={"ecc_error_threshold": 20})["accepted"]
    temp = {"status": "firing", "labels": {"alertname": "GpuTemperatureHigh", "node": "gpu-2", "gpu": "0"},
            "annotations": {"value": "95.5"}, "fingerprint": "t"}
    assert gpu_alerts.read_alert(temp, HOSTS)["problem"]["action"] == "drain"
    assert gpu_alerts.read_alert(alert(xid="13"), HOSTS, policy={"xid_actions": {13: "drain"}})["accepted"]
    labels = {"alertname": "SiteRowRemap", "gpuops_check": "remapped_rows_failure", "node": "gpu-3"}
    custom = {"status": "firing", "labels": labels, "fingerprint": "r"}
    assert gpu_alerts.read_alert(custom, HOSTS)["problem"]["action"] == "reboot"


def test_resolved_alert_carries_no_problem():
    out = gpu_alerts.read_alert(alert(status="resolved"), HOSTS)
    assert out["accepted"] and out["status"] == "resolved" and out["problem"] is None and out["key"] == "fp1"


# --- plan_actions with alerts ----------------------------------------------------------------

def node(name, **ann):
    return {"metadata": {"name": name, "labels": {}, "annotations": dict(ann)}, "spec": {}}


def quarantined(name, **ann):
    n = node(name, **dict({health_checks.ANN_CORDONED_BY: health_checks.CORDONED_BY_VALUE, health_checks.ANN_REASON: "x"}, **ann))
    n["spec"]["unschedulable"] = True
    return n


HEALTHY = {"healthy": True, "problems": [], "reason": "", "remediation": "none"}
POLICY = {"dry_run": False, "uncordon_after": 2, "max_unhealthy_fraction": 0.25}


def test_firing_alert_cordons_and_is_recorded_on_the_node():
    nodes = [node("gpu-%d" % i) for i in range(1, 9)]
    firing = gpu_alerts.read_alert(alert(), ["gpu-%d" % i for i in range(1, 9)])
    plan = health_checks.plan_actions({"gpu-1": HEALTHY}, nodes, POLICY, now="t", alerts={"gpu-1": [firing]})
    act = [a for a in plan["actions"] if a["node"] == "gpu-1"][0]
    assert act["action"] == "cordon" and act["reason"] == "GPU 3: Xid 79 (alert GpuXidError)"
    ann = act["patch"]["metadata"]["annotations"]
    assert json.loads(ann[health_checks.ANN_ALERTS]) == {"fp1": firing["problem"]}
    assert [a["action"] for a in plan["actions"] if a["node"] != "gpu-1"] == ["none"] * 7


def test_recorded_alert_keeps_the_node_until_resolved_then_hysteresis():
    firing = gpu_alerts.read_alert(alert(), HOSTS)
    held = quarantined("gpu-1", **{health_checks.ANN_ALERTS: json.dumps({"fp1": firing["problem"]}, sort_keys=True),
                                   health_checks.ANN_REASON: firing["problem"]["detail"], health_checks.ANN_STREAK: "0"})
    nodes = [held] + [node(h) for h in HOSTS[1:]]
    # a scheduled check sees a healthy host and no alert: the recorded alert still holds the node
    keep = health_checks.plan_actions({"gpu-1": HEALTHY}, nodes, POLICY)
    act = keep["actions"][0]
    assert act["action"] == "keep" and act["patch"] is None
    # the resolved alert: the record goes, the hysteresis starts counting
    resolved = gpu_alerts.read_alert(alert(status="resolved"), HOSTS)
    wait = health_checks.plan_actions({"gpu-1": HEALTHY}, nodes, POLICY, alerts={"gpu-1": [resolved]})["actions"][0]
    assert wait["action"] == "wait"
    assert wait["patch"]["metadata"]["annotations"] == {health_checks.ANN_STREAK: "1", health_checks.ANN_ALERTS: None}


def test_breaker_counts_alert_cordons_like_any_other():
    nodes = [quarantined("gpu-1")] + [node("gpu-%d" % i) for i in range(2, 9)]
    hosts = ["gpu-%d" % i for i in range(1, 9)]
    plan = health_checks.plan_actions({"gpu-2": HEALTHY, "gpu-3": HEALTHY}, nodes, POLICY,
                                      alerts={"gpu-2": [gpu_alerts.read_alert(alert("gpu-2", fp="a"), hosts)],
                                              "gpu-3": [gpu_alerts.read_alert(alert("gpu-3", fp="b"), hosts)]})
    acts = dict((a["node"], a) for a in plan["actions"])
    assert acts["gpu-2"]["action"] == "cordon" and acts["gpu-3"]["action"] == "blocked"
    assert "circuit breaker open: 2 of 8 GPU nodes already quarantined (limit 2)" in acts["gpu-3"]["reason"]
    assert acts["gpu-3"]["patch"] is None and plan["breaker"]["blocked"] == ["gpu-3"]


def test_dropped_alerts_count_for_nothing_and_unknown_nodes_fail():
    nodes = [node(h) for h in HOSTS]
    dropped = gpu_alerts.read_alert(alert(xid="13"), HOSTS)
    plan = health_checks.plan_actions({"gpu-1": HEALTHY}, nodes, POLICY, alerts={"gpu-1": [dropped]})
    assert plan["actions"][0]["action"] == "none" and not plan["changed"]
    with pytest.raises(health_checks.GpuOpsError, match="alerts name nodes that are not in the GPU node pool"):
        health_checks.plan_actions({}, nodes, POLICY, alerts={"gpu-9": [gpu_alerts.read_alert(alert(), HOSTS)]})


def test_unreadable_alert_annotation_counts_as_none():
    assert health_checks.node_alerts(node("a", **{health_checks.ANN_ALERTS: "{oops"})) == {}
    assert health_checks.node_alerts(node("a", **{health_checks.ANN_ALERTS: "[1]"})) == {}
