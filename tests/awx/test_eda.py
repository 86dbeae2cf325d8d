# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Event-driven remediation for real: ansible-rulebook (decision environment venv, Java) runs the collection's
rulebook gpuops.k8s.gpu_health_alerts with its webhook on a local port; the test posts Alertmanager notifications
with urllib, as Alertmanager would, and watches the kwok nodes of the local control plane.

The pool: 8 simulated single-GPU hosts and their kwok nodes, labelled with a pool label that is the circuit
breaker's denominator (gpuops_eda_node_selector); breaker 0.25 -> at most 2 nodes quarantined; hysteresis 2.

1. an Xid 79 alert for one node -> that node is cordoned and tainted with the Xid in its reason; the others untouched;
   the same alert again is throttled (no second run)
2. a burst of alerts for half the pool (4 nodes) -> one more node is cordoned, then the breaker stops and says so
3. bad input (no node label, an unknown node, a body that is not JSON, a JSON body that is no notification,
   an Xid that is not a number, an application Xid) -> logged and dropped with a reason; nothing cordoned
4. the resolved alert of the first node -> checked again: healthy 1 of 2, still cordoned; the next scheduled check
   uncordons it, while the node whose alert still fires stays quarantined
"""
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
import yaml

from awxlib import rulebook as rulebook_lib
from lib import gpu_nodes
from lib.wait import wait_for

POOL_SIZE = 8
TIMELINE = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class WebhookRulebook(rulebook_lib.Rulebook):
    """The health rulebook, whose source is ansible-rulebook's webhook on ``port``."""

    def __init__(self, port, *args):
        super(WebhookRulebook, self).__init__(*args)
        self.port = port

    def post(self, body, raw=None):
        data = raw if raw is not None else json.dumps(body).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/alerts" % self.port, data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


def alert(node, fingerprint, status="firing", xid=79, gpu=0, **labels):
    lab = {"alertname": "GpuXidError", "gpuops_check": "xid", "gpu": str(gpu), "xid": str(xid),
           "modelName": "NVIDIA L40S", "UUID": "GPU-%s" % fingerprint}
    if node is not None:
        lab["node"] = node
    lab.update(labels)
    return {"status": status, "labels": lab,
            "annotations": {"summary": "GPU %s on %s reported Xid %s" % (gpu, node, xid), "value": str(xid)},
            "startsAt": "2026-12-03T10:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.invalid/graph", "fingerprint": fingerprint}


def notification(*alerts, **kw):
    return {"version": "4", "groupKey": "{}:{alertname=\"GpuXidError\"}", "truncatedAlerts": 0,
            "status": kw.get("status", "firing"), "receiver": "gpuops-eda", "groupLabels": {"alertname": "GpuXidError"},
            "commonLabels": {}, "commonAnnotations": {}, "externalURL": "http://alertmanager.invalid",
            "alerts": list(alerts)}


@pytest.fixture(scope="module")
def pool(k8s_cluster, de, tmp_path_factory, unique_pool):
    api = k8s_cluster.core
    work = tmp_path_factory.mktemp("eda")
    sim_dir = str(work / "sim")
    os.makedirs(sim_dir)
    names = ["eda-%s-%d" % (unique_pool, i) for i in range(1, POOL_SIZE + 1)]
    gpus = [{"model": "l40s_48gb", "count": 1}]
    # one self-contained inventory file: ansible-rulebook copies only the file into each job's private data dir
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                 "gpuops_sim_dir": sim_dir, "gpuops_simulator": "{{ gpuops_sim_dir }}/{{ inventory_hostname }}.json",
                 "gpu_health_kernel_log_source": "file",
                 "gpu_health_kernel_log_path": "{{ gpuops_sim_dir }}/{{ inventory_hostname }}.kmsg",
                 "gpu_health_expected_gpus": 1},
        "children": {"gpu_nodes": {"hosts": dict((n, {"gpuops_sim_gpus": gpus}) for n in names)}}}}
    inv_path = str(work / "hosts.yml")
    with open(inv_path, "w") as f:
        yaml.safe_dump(inventory, f)
    env = de.env(HOME=str(work), ANSIBLE_HOME=str(work / ".ansible"), KUBECONFIG=k8s_cluster.kubeconfig)
    made = subprocess.run([os.path.join(de.bin, "ansible-playbook"), "-i", inv_path, "gpuops.k8s.lab.sim_lab"],
                          cwd=str(work), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert made.returncode == 0, made.stdout[-4000:]
    selector = "gpuops.k8s/e2e-pool=%s" % unique_pool
    for name in names:
        gpu_nodes.ensure_node(api, name, gpus=gpus, labels={"gpuops.k8s/e2e-pool": unique_pool})
    port = free_port()
    vars_path = str(work / "vars.yml")
    with open(vars_path, "w") as f:
        yaml.safe_dump({"gpuops_eda_port": port, "gpuops_eda_node_selector": selector,
                        "gpuops_eda_max_unhealthy_fraction": 0.25, "gpuops_eda_uncordon_after": 2}, f)
    rulebook = WebhookRulebook(port, de, "gpuops.k8s.gpu_health_alerts", inv_path, vars_path, str(work), env)

    def listening():
        rulebook.alive()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    wait_for(listening, 90, what="the rulebook's webhook on port %d" % port)
    state = {"api": api, "names": names, "rulebook": rulebook, "inventory": inv_path, "selector": selector,
             "env": env, "de": de, "work": str(work), "sim_dir": sim_dir}
    yield state
    rulebook.stop()
    print("\nEDA timeline (s since the rulebook listened):\n" + "\n".join("  %6.1f  %s" % e for e in TIMELINE))
    print("rulebook log: %s (%d playbook runs)" % (rulebook.log_path, rulebook.runs()))
    for name in names:
        gpu_nodes.delete_node(api, name)


@pytest.fixture(scope="module")
def unique_pool():
    import uuid
    return uuid.uuid4().hex[:5]


def mark(pool, what):
    TIMELINE.append((round(time.time() - pool["rulebook"].t0, 1), what))


def cordoned(pool):
    return [n for n in pool["names"] if pool["api"].read_node(n).spec.unschedulable]


def annotations(pool, name):
    return pool["api"].read_node(name).metadata.annotations or {}


def test_xid_alert_cordons_that_node_only(pool):
    rb, names = pool["rulebook"], pool["names"]
    t0 = time.time()
    assert rb.post(notification(alert(names[0], "fp-1"))) == 200
    mark(pool, "Xid 79 alert posted for %s" % names[0])
    wait_for(lambda: pool["api"].read_node(names[0]).spec.unschedulable, 120, what=names[0] + " cordoned")
    mark(pool, "%s cordoned (%.1f s after the post)" % (names[0], time.time() - t0))
    rb.wait_runs(1)
    assert cordoned(pool) == [names[0]]
    node = pool["api"].read_node(names[0])
    ann = node.metadata.annotations
    assert ann["gpuops.k8s/health.cordoned-by"] == "gpuops.k8s/gpu_health"
    assert "Xid 79 (alert GpuXidError)" in ann["gpuops.k8s/health.reason"], ann
    assert "fp-1" in json.loads(ann["gpuops.k8s/health.alerts"])
    assert any(t.key == "nvidia.com/gpu-error" for t in node.spec.taints or [])
    for other in names[1:]:
        assert "gpuops.k8s/health.cordoned-by" not in annotations(pool, other)
    # rate limit: the same alert again (Alertmanager repeats it) runs nothing; the marker after it proves it was seen
    assert rb.post(notification(alert(names[0], "fp-1"))) == 200
    assert rb.post({"marker": 1}) == 200
    rb.wait_log("not an Alertmanager alert with a node label and a fingerprint", 1)
    assert rb.runs() == 1, "the repeated alert ran the playbook again (throttle)"
    mark(pool, "repeated alert throttled (still 1 run)")


def test_burst_for_half_the_pool_stops_at_the_breaker(pool):
    rb, names = pool["rulebook"], pool["names"]
    burst = names[1:1 + POOL_SIZE // 2]
    assert rb.post(notification(*[alert(n, "fp-burst-%d" % i, gpu=0, xid=48) for i, n in enumerate(burst)])) == 200
    mark(pool, "burst: Xid 48 alerts for %d nodes posted" % len(burst))
    rb.wait_runs(1 + len(burst))
    mark(pool, "burst: %d runs done" % len(burst))
    assert cordoned(pool) == [names[0], burst[0]]
    log = rb.log()
    for blocked in burst[1:]:
        assert "circuit breaker open: %s not quarantined (limit 2 of 8 GPU nodes)" % blocked in log, log[-4000:]
        assert "gpuops.k8s/health.cordoned-by" not in annotations(pool, blocked)
    assert "%s: blocked - circuit breaker open: 2 of 8 GPU nodes already quarantined (limit 2)" % burst[1] in log


@pytest.mark.parametrize("case,body,expect", [
    ("no node label", lambda n: notification(alert(None, "fp-bad-1")), "rulebook"),
    ("unknown node", lambda n: notification(alert("gpu-does-not-exist", "fp-bad-2")),
     "unknown node gpu-does-not-exist: not a host of the GPU pool inventory (8 hosts)"),
    ("not JSON", None, 400),
    ("JSON but no notification", lambda n: {"hello": "world"}, "rulebook"),
    ("Xid not a number", lambda n: notification(alert(n[5], "fp-bad-3", xid="abc")),
     "malformed alert: GpuXidError value 'abc' is not a number"),
    ("application Xid", lambda n: notification(alert(n[5], "fp-bad-4", xid=13)),
     "Xid 13 on %s is ignored by the gpu_health policy (application error)"),
])
def test_bad_input_is_dropped_with_a_reason(pool, case, body, expect):
    rb, names = pool["rulebook"], pool["names"]
    before_runs = rb.runs()
    before = cordoned(pool)
    if body is None:
        assert rb.post(None, raw=b"{not json") == 400
        assert rb.post({"marker": case}) == 200
        rb.wait_log("not an Alertmanager alert with a node label and a fingerprint",
                    rb.log().count("not an Alertmanager alert with a node label") + 1)
        assert "failed to decode JSON payload" in rb.log()
    elif expect == "rulebook":
        count = rb.log().count("GPU health alert dropped, nothing run")
        assert rb.post(body(names)) == 200
        rb.wait_log("GPU health alert dropped, nothing run", count + 1)
        assert rb.runs() == before_runs
    else:
        assert rb.post(body(names)) == 200
        rb.wait_runs(before_runs + 1)
        text = expect % names[5] if "%s" in expect else expect
        wait_for(lambda: "alert dropped, nothing checked or changed: " + text in rb.log(), 30, what=text)
    assert cordoned(pool) == before
    mark(pool, "bad input dropped: %s" % case)


def test_recovery_alert_uncordons_after_the_hysteresis(pool):
    rb, names, api = pool["rulebook"], pool["names"], pool["api"]
    runs = rb.runs()
    resolved = alert(names[0], "fp-1", status="resolved")
    resolved["endsAt"] = "2026-12-03T10:05:00Z"
    assert rb.post(notification(resolved, status="resolved")) == 200
    mark(pool, "resolved alert posted for %s" % names[0])
    rb.wait_runs(runs + 1)
    wait_for(lambda: annotations(pool, names[0]).get("gpuops.k8s/health.healthy-streak") == "1", 30,
             what="healthy streak 1 on " + names[0])
    ann = annotations(pool, names[0])
    assert api.read_node(names[0]).spec.unschedulable, "uncordoned before the hysteresis"
    assert "gpuops.k8s/health.alerts" not in ann
    mark(pool, "%s healthy 1 of 2, still cordoned" % names[0])
    # the next scheduled check (the AWX schedule of the health template), over the whole pool
    proc = subprocess.run([os.path.join(pool["de"].bin, "ansible-playbook"), "-i", pool["inventory"], "gpuops.k8s.health",
                           "-e", "gpu_health_dry_run=false", "-e", "gpu_health_uncordon_after=2",
                           "-e", "gpu_health_max_unhealthy_fraction=0.25",
                           "-e", "gpu_health_node_selector=" + pool["selector"]],
                          cwd=pool["work"], env=pool["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert not api.read_node(names[0]).spec.unschedulable
    assert not any(t.key == "nvidia.com/gpu-error" for t in api.read_node(names[0]).spec.taints or [])
    mark(pool, "scheduled check: %s uncordoned" % names[0])
    # the burst's first node: its alert still fires (recorded on the node), so the check keeps it
    assert cordoned(pool) == [names[1]]
    assert "Xid 48 (alert GpuXidError)" in annotations(pool, names[1])["gpuops.k8s/health.reason"]
