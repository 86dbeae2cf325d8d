"""GPU usage and chargeback, and the Grafana dashboard, on the real metric path (docs/usage-report.md): the lab's
kube-state-metrics (against the local control plane) and the simulated DCGM exporter -> the real Prometheus ->
playbooks/usage_report.yml, and every panel of the shipped dashboard.

The scene (two kwok A100 80GB nodes; namespaces labelled team=vision-<id> and team=speech-<id>, the report's
tenant_label):

    vision  a-train  1 nvidia.com/gpu          engine active 80 %   (whole window)
            a-idle   1 nvidia.com/gpu          engine active 0 %    (whole window: the deliberately idle holder)
            c-wait   4 nvidia.com/gpu          Pending (no node has 4 GPUs)
    speech  b-serve  1 nvidia.com/mig-3g.40gb  engine active 50 %   (whole window), priority class e2e-usage-<id>
            b-batch  1 nvidia.com/mig-3g.40gb  engine active 100 %  (deleted DELETE_AT s into the window)

The window [start, start + WINDOW] at step STEP = the lab's scrape interval (2 s) starts on the first step after
Prometheus holds every pod's phase, requests and told activity, so its steady pods count on every one of its
WINDOW / STEP samples. Worked out by hand (a 3g.40gb slice is 3/7 of an A100, W = WINDOW / 3600 h,
Tb = b-batch's time Running inside the window):

    vision  allocated 2 W           active 0.8 W                 pending 4 W   idle (a-idle) 1 GPU x W
    speech  allocated 3/7 (W + Tb)  active 3/7 (0.5 W + 1.0 Tb)

Tolerance. The steady pods are exact up to the report's rounding (4 decimals per pod and per row: (pods + 1) x
0.00005 GPU-h), or up to MISSED = two steps short: on the loaded 2-core machine (load average 3-14) four of five
runs gave vision 26-28 s of its 30 s allocated (grid points without a sample; the cause - a scrape
timing out at the 2 s interval, or ingestion lag - is not pinned down). Samples can go missing, never appear twice,
so the upper bounds stay exact. b-batch's edge: the test deletes it at t_del and sees it gone at t_gone; every sample at or before
t_del counts it, and no sample after the first scrape that no longer sees it (kube-state-metrics' watch and the
exporter's 1 s poll: LAG = 1 s after t_gone, the scrape up to one SCRAPE interval later, when Prometheus marks the
series stale). So Tb lies in [t_del - start - STEP, t_gone - start + LAG + SCRAPE], i.e. its allocated and active
GPU-hours within 3/7 of those bounds (plus the rounding).

The dashboard test runs every panel query of the shipped Grafana dashboard (the dcgm_exporter role's ConfigMap, its
template variables set to the values the lab has) and every recording rule's expression against the same Prometheus
(the role's PrometheusRules are its rule files, evaluated every scrape interval; an Xid 79 told to the exporter makes
the GpuXidError alert fire for the alerts panel) and fails naming each panel or rule that returns nothing.
"""
import json
import math
import os
import re
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from kubernetes import client

from lib import cluster as cluster_lib
from lib import gpu_nodes, metrics_lab, playbook
from lib.wait import nodes_schedulable, pod_manifest, wait_for

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAPE = 2.0     # the lab's scrape and rule evaluation interval (s)
STEP = 2.0       # the report's step (s)
WINDOW = 30.0    # the report's window (s)
DELETE_AT = 12.0  # b-batch is deleted this many seconds into the window
LAG = 1.0        # kube-state-metrics' watch / the exporter's poll after the pod is gone (s)
MISSED = 2 * STEP  # samples missing at grid points on the loaded machine (measured: up to 2 steps short; see above)
GPU = "nvidia.com/gpu"
SLICE = "nvidia.com/mig-3g.40gb"
MIG_FRACTION = 3 / 7.0
ACTIVITY = {"a-train": 80, "a-idle": 0, "b-serve": 50, "b-batch": 100}  # percent, told to the exporter
TASK = "Read Prometheus and write the report"


def prom(lab, path, **params):
    with urllib.request.urlopen(lab.prometheus_url + path + "?" + urllib.parse.urlencode(params, doseq=True),
                                timeout=10) as r:
        return json.loads(r.read())["data"]


@pytest.fixture(scope="module")
def scene(k8s_cluster, tmp_path_factory):
    """The nodes, tenants, pods and metric path above, and the window's times; all deleted afterwards."""
    core = k8s_cluster.core
    u = os.urandom(3).hex()
    whole, mig = "e2e-usage-whole-%s" % u, "e2e-usage-mig-%s" % u
    gpu_nodes.ensure_node(core, whole, gpus=[{"model": "a100_80gb", "count": 3}], labels={"e2e-usage": u + "-whole"})
    gpu_nodes.ensure_node(core, mig, gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                          mig_config={"3g.40gb": 2}, labels={"e2e-usage": u + "-mig"})
    ns = {"vision": "e2e-usage-vision-" + u, "speech": "e2e-usage-speech-" + u}
    # tenant names of this run only: the lab's Prometheus keeps its TSDB between labs (cluster state dir), and an
    # earlier lab's last samples stay visible for the 5 min lookback after it stopped (no staleness marks on shutdown)
    tenant = {"vision": "vision-" + u, "speech": "speech-" + u}
    prio = "e2e-usage-" + u
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    lab = metrics_lab.MetricsLab(cluster_lib.LocalCluster(k8s_cluster.state_dir), scrape_interval="%ds" % SCRAPE)
    try:
        nodes_schedulable(core, "e2e-usage in (%s-whole,%s-mig)" % (u, u), 2)
        for team, name in ns.items():
            core.create_namespace({"metadata": {"name": name, "labels": {"team": tenant[team]}}})
        sched.create_priority_class({"metadata": {"name": prio}, "value": 1000})
        lab.start(render_dir=str(tmp_path_factory.mktemp("usage-render")))
        # the activity of each pod, and an Xid 79 on the whole-GPU node's GPU 0 (the dashboard's alerts panel)
        lab.put_load({"rules": [{"namespace": ns["vision" if p[0] != "b" else "speech"], "pod_prefix": p, "gpu": g}
                                for p, g in ACTIVITY.items()], "default": 0,
                      "health": [{"node": whole, "gpu": 0, "xid": 79}]})
        sel_whole, sel_mig = {"e2e-usage": u + "-whole"}, {"e2e-usage": u + "-mig"}
        for name, team, res, sel, pc in (("a-train", "vision", {GPU: 1}, sel_whole, None),
                                         ("a-idle", "vision", {GPU: 1}, sel_whole, None),
                                         ("c-wait", "vision", {GPU: 4}, sel_whole, None),
                                         ("b-serve", "speech", {SLICE: 1}, sel_mig, prio),
                                         ("b-batch", "speech", {SLICE: 1}, sel_mig, None)):
            core.create_namespaced_pod(ns[team], pod_manifest(name, res, sel, priority_class=pc))
        nsre = "|".join(ns.values())

        def settled():
            running = prom(lab, "/api/v1/query", query='kube_pod_status_phase{namespace=~"%s", phase="Running"} == 1'
                           % nsre)["result"]
            pending = prom(lab, "/api/v1/query", query='kube_pod_status_phase{namespace=~"%s", phase="Pending"} == 1'
                           % nsre)["result"]
            active = prom(lab, "/api/v1/query", query='DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_namespace=~"%s"}'
                          % nsre)["result"]
            told = dict((r["metric"]["exported_pod"], float(r["value"][1])) for r in active)
            ok = (sorted(r["metric"]["pod"] for r in running) == sorted(ACTIVITY)
                  and [r["metric"]["pod"] for r in pending] == ["c-wait"]
                  and told == dict((p, g / 100.0) for p, g in ACTIVITY.items()))
            return ok or (sorted(r["metric"]["pod"] for r in running), told)
        wait_for(settled, timeout=90, what="Prometheus holding the 4 running pods (kube-state-metrics), c-wait "
                                           "Pending and the told activity of each (DCGM exporter)")
        start = math.ceil(time.time() / STEP) * STEP
        end = start + WINDOW
        time.sleep(max(0.0, start + DELETE_AT - time.time()))
        t_del, t_gone = gpu_nodes.delete_pod_and_wait(core, "b-batch", ns["speech"], timeout=30)
        # the last sample of the window scraped
        time.sleep(max(0.0, end + SCRAPE - time.time()))
        yield {"lab": lab, "ns": ns, "tenant": tenant, "nodes": [whole, mig], "prio": prio, "start": start, "end": end,
               "t_del": t_del, "t_gone": t_gone, "tmp": tmp_path_factory.mktemp("usage")}
    finally:
        lab.stop()
        gpu_nodes.remove_test_objects(core, sched, list(ns.values()), prio, (whole, mig))


def hours(seconds):
    return seconds / 3600.0


def test_usage_report_finds_idle_pod_and_matches_told_activity(scene):
    lab, ns, tmp = scene["lab"], scene["ns"], scene["tmp"]
    start, end = scene["start"], scene["end"]
    run = playbook.run(os.path.join(TOP, "playbooks", "usage_report.yml"), cwd=tmp, timeout=300,
                       extra_vars={"usage_prometheus_url": lab.prometheus_url, "usage_start": "%d" % start,
                                   "usage_end": "%d" % end, "usage_step": "%ds" % STEP, "usage_tenant_label": "team",
                                   "usage_idle_min_duration": "10s", "usage_report": str(tmp / "report"),
                                   "ansible_python_interpreter": sys.executable})
    res = run.result(TASK)
    assert res["window"]["hours"] == pytest.approx(hours(WINDOW), abs=1e-4), res["window"]
    tenants = dict((t["name"], t) for t in res["tenants"])
    names = scene["tenant"]
    assert {names["vision"], names["speech"]} <= set(tenants), sorted(tenants)
    w = hours(end - start)
    v, s = tenants[names["vision"]], tenants[names["speech"]]
    print("usage e2e: window %s; vision %s; speech %s; b-batch deleted %.1f s / gone %.1f s into the window"
          % (res["window"], dict((k, v[k]) for k in ("allocated_gpu_hours", "active_gpu_hours", "pending_gpu_hours")),
             dict((k, s[k]) for k in ("allocated_gpu_hours", "active_gpu_hours")),
             scene["t_del"] - start, scene["t_gone"] - start))
    # vision: steady, each of its pods at most one step short (MISSED); 3 pods: (3 + 1) x 0.00005 of rounding
    rnd = 4 * 0.00005
    wm = hours(end - start - MISSED)
    assert 2 * wm - rnd <= v["allocated_gpu_hours"] <= 2 * w + rnd, (2 * wm, 2 * w, v)
    assert 0.8 * wm - rnd <= v["active_gpu_hours"] <= 0.8 * w + rnd, (0.8 * wm, 0.8 * w, v)
    assert 4 * wm - rnd <= v["pending_gpu_hours"] <= 4 * w + rnd, (4 * wm, 4 * w, v)
    # speech: b-serve steady; b-batch's time Running in [t_del - start - STEP, t_gone - start + LAG + SCRAPE]
    tb_lo = scene["t_del"] - start - STEP - MISSED
    tb_hi = scene["t_gone"] - start + LAG + SCRAPE
    rnd = 3 * 0.00005
    lo, hi = MIG_FRACTION * hours(WINDOW - MISSED + tb_lo), MIG_FRACTION * hours(WINDOW + tb_hi)
    assert lo - rnd <= s["allocated_gpu_hours"] <= hi + rnd, (lo, hi, s)
    lo, hi = MIG_FRACTION * hours(0.5 * (WINDOW - MISSED) + tb_lo), MIG_FRACTION * hours(0.5 * WINDOW + tb_hi)
    assert lo - rnd <= s["active_gpu_hours"] <= hi + rnd, (lo, hi, s)
    # the idle holder: a-idle alone, with its tenant, idle the whole window on one GPU
    mine = [h for h in res["idle_holders"] if h["namespace"] in ns.values()]
    assert [(h["pod"], h["tenant"], h["namespace"]) for h in mine] == [("a-idle", names["vision"], ns["vision"])], mine
    assert wm - 0.0001 <= mine[0]["idle_gpu_hours"] <= w + 0.0001 and mine[0]["node"] == scene["nodes"][0], mine
    # kube-state-metrics' kube_pod_info: the node and the priority class reach the report
    pods = dict((p["pod"], p) for p in res["pods"] if p["namespace"] in ns.values())
    assert pods["b-serve"]["priority_class"] == scene["prio"] and pods["b-serve"]["node"] == scene["nodes"][1], pods
    assert pods["b-serve"]["resources"] == ["nvidia_com_mig_3g_40gb"], pods["b-serve"]
    with open(res["report"]["path"]) as f:
        text = f.read()
    assert "a-idle" in text and names["vision"] in text, text[:2000]


def _panels(panels):
    for p in panels:
        yield p
        yield from _panels(p.get("panels") or [])


def test_dashboard_every_panel_returns_series(scene):
    lab, ns = scene["lab"], scene["ns"]
    dashboard = None
    for name in sorted(os.listdir(lab.render_dir)):
        if name.endswith(".yaml"):
            with open(os.path.join(lab.render_dir, name)) as f:
                for doc in yaml.safe_load_all(f):
                    if doc and doc.get("kind") == "ConfigMap" and "gpuops-gpu-dashboard.json" in (doc.get("data") or {}):
                        dashboard = json.loads(doc["data"]["gpuops-gpu-dashboard.json"])
    assert dashboard, "no Grafana dashboard ConfigMap rendered in %s" % lab.render_dir
    # the template variables: each query variable must find values in the lab; the panels get the lab's own
    values = {}
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.match(r"^label_values\((.+),\s*(\w+)\)$", q)
        assert m, "template variable %s: %r is not label_values(metric, label)" % (var["name"], q)
        found = prom(lab, "/api/v1/label/%s/values" % m.group(2), **{"match[]": m.group(1)})
        values[var["name"]] = found
    want = {"namespace": sorted(ns.values()), "node": sorted(scene["nodes"])}
    for name, vals in want.items():
        assert set(vals) <= set(values.get(name) or []), "template variable %s: %s lacks the lab's %s" % (
            name, values.get(name), vals)

    def expr_of(text):
        for name, vals in want.items():
            text = text.replace("${%s}" % name, "|".join(vals)).replace("$" + name, "|".join(vals))
        assert "$" not in text, "unsubstituted variable in %r" % text
        return text
    queries = [("panel %r" % p.get("title"), expr_of(t["expr"])) for p in _panels(dashboard.get("panels") or [])
               for t in p.get("targets") or [] if t.get("expr")]
    assert len(queries) >= 10, queries
    records = [("recording rule %s" % r["record"], r["expr"]) for g in metrics_lab.read_rule_groups(lab.render_dir)
               for r in g.get("rules") or [] if r.get("record")]
    assert records, "no recording rules rendered"

    def empty():
        return [what for what, q in queries + records if not prom(lab, "/api/v1/query", query=q)["result"]]
    # recorded series and the alert need a rule evaluation or two after the scrapes (every SCRAPE s)
    try:
        wait_for(lambda: not empty(), timeout=20, interval=2, what="every panel and recording rule returning series")
    except AssertionError:
        pytest.fail("these return nothing against the lab's Prometheus: %s" % "; ".join(empty()))
    print("dashboard e2e: %d panel queries and %d recording rules return series" % (len(queries), len(records)))
