"""The cluster's own history, replayed (docs/whatif.md, "Your own cluster's history"): GPU pods created and deleted on
kwok GPU nodes with known times -> the lab's kube-state-metrics -> the real Prometheus -> playbooks/whatif_cluster.yml
(gpuops.k8s.gpu_pod_history, then gpuops.k8s.gpu_whatif with the capacity search).

The scene (kwok A100 80GB nodes: one with 4 whole GPUs, one MIG node with two 3g.40gb slices; one namespace):

    h-run    2 nvidia.com/gpu           created before the window, priority class e2e-hist-<id>, running to its end
    h-mig-a  1 nvidia.com/mig-3g.40gb   created before the window, no priority class, running to its end
    h-mig-b  1 nvidia.com/mig-3g.40gb   created before the window, no priority class, running to its end
    h-short  1 nvidia.com/gpu           created before the window, deleted DELETE_AT s into it
    h-late   1 nvidia.com/gpu           created CREATE_AT s into the window, running to its end

The window [start, start + WINDOW] at step STEP = the lab's scrape interval (2 s). Read back, worked out by hand:
the pods created before the window arrive at 0; the running ones leave at WINDOW (the window's length); a 3g.40gb
slice is 1 x 428 milli (min(3/7, 4/8)); h-late's creation is kube_pod_created (whole seconds) - start, within
[t_create - start - 1, t_created - start]; h-short's end is its deletion timestamp (whole seconds: t_del - 1 at the
earliest) or the first step at or after the last scrape that saw it (a scrape every SCRAPE s saw it within SCRAPE
before t_del; none saw it after t_gone + LAG): within [t_del - start - SCRAPE, t_gone - start + LAG + STEP] (LAG:
kube-state-metrics' watch), i.e. one scrape interval earlier or one step plus the watch lag later.

GPUs needed at 99 % served, best-fit scoring (it packs the two slices' pods on one GPU where it may; kube-default
spreads them at random), on a pool of 2-GPU nodes (the search's resolution is a node): exclusive takes a whole GPU
per slice, so 2 + 1 + 1 + 1 (h-short, then h-late) = 5 GPUs at every instant -> 3 nodes, 6 GPUs; fractional puts
both slices on one GPU (2 x 428 <= 1000): 2 + 1 + 1 = 4 GPUs -> 2 nodes, 4 GPUs (4 GPUs exclusive would leave one
pod waiting for most of the window, far more than 1 % of the GPU-time).
"""
import csv
import math
import os
import sys
import time

import pytest
from kubernetes import client

from lib import cluster as cluster_lib
from lib import gpu_nodes, metrics_lab, playbook
from lib.wait import nodes_schedulable, pod_manifest, wait_for

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAPE = 2.0     # the lab's scrape interval (s)
STEP = 2.0       # the history's step (s)
WINDOW = 24.0    # the window (s)
DELETE_AT = 6.0  # h-short is deleted this many seconds into the window
CREATE_AT = 14.0  # h-late is created this many seconds into the window
LAG = 1.0        # kube-state-metrics' watch after the pod is gone (s)
GPU = "nvidia.com/gpu"
SLICE = "nvidia.com/mig-3g.40gb"
BEFORE = ("h-run", "h-mig-a", "h-mig-b", "h-short")


@pytest.fixture(scope="module")
def scene(k8s_cluster, tmp_path_factory):
    core = k8s_cluster.core
    u = os.urandom(3).hex()
    whole, mig = "e2e-hist-whole-%s" % u, "e2e-hist-mig-%s" % u
    gpu_nodes.ensure_node(core, whole, gpus=[{"model": "a100_80gb", "count": 4}], labels={"e2e-hist": u + "-whole"})
    gpu_nodes.ensure_node(core, mig, gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                          mig_config={"3g.40gb": 2}, labels={"e2e-hist": u + "-mig"})
    ns = "e2e-hist-" + u
    prio = "e2e-hist-" + u
    sched = client.SchedulingV1Api(k8s_cluster.api_client())
    lab = metrics_lab.MetricsLab(cluster_lib.LocalCluster(k8s_cluster.state_dir), scrape_interval="%ds" % SCRAPE)
    try:
        nodes_schedulable(core, "e2e-hist in (%s-whole,%s-mig)" % (u, u), 2)
        core.create_namespace({"metadata": {"name": ns}})
        sched.create_priority_class({"metadata": {"name": prio}, "value": 1000})
        lab.start(render_dir=str(tmp_path_factory.mktemp("hist-render")))
        sel_whole, sel_mig = {"e2e-hist": u + "-whole"}, {"e2e-hist": u + "-mig"}
        pods = {"h-run": ({GPU: 2}, sel_whole, prio), "h-mig-a": ({SLICE: 1}, sel_mig, None),
                "h-mig-b": ({SLICE: 1}, sel_mig, None), "h-short": ({GPU: 1}, sel_whole, None),
                "h-late": ({GPU: 1}, sel_whole, None)}
        for name in BEFORE:
            res, sel, pc = pods[name]
            core.create_namespaced_pod(ns, pod_manifest(name, res, sel, priority_class=pc))

        def settled():
            running = metrics_lab_query(lab, 'kube_pod_status_phase{namespace="%s", phase="Running"} == 1' % ns)
            return sorted(r["metric"]["pod"] for r in running) == sorted(BEFORE) or sorted(
                r["metric"]["pod"] for r in running)
        wait_for(settled, timeout=60, what="Prometheus holding the 4 pods Running (kube-state-metrics)")
        start = math.ceil(time.time() / STEP) * STEP
        end = start + WINDOW
        time.sleep(max(0.0, start + DELETE_AT - time.time()))
        t_del, t_gone = gpu_nodes.delete_pod_and_wait(core, "h-short", ns, timeout=20)
        time.sleep(max(0.0, start + CREATE_AT - time.time()))
        t_create = time.time()
        res, sel, pc = pods["h-late"]
        core.create_namespaced_pod(ns, pod_manifest("h-late", res, sel, priority_class=pc))
        t_created = time.time()
        time.sleep(max(0.0, end + SCRAPE - time.time()))  # the window's last sample scraped
        yield {"lab": lab, "ns": ns, "prio": prio, "start": start, "end": end, "t_del": t_del, "t_gone": t_gone,
               "t_create": t_create, "t_created": t_created, "tmp": tmp_path_factory.mktemp("hist")}
    finally:
        lab.stop()
        gpu_nodes.remove_test_objects(core, sched, [ns], prio, (whole, mig))


def metrics_lab_query(lab, q):
    import json
    import urllib.parse
    import urllib.request
    with urllib.request.urlopen(lab.prometheus_url + "/api/v1/query?" + urllib.parse.urlencode({"query": q}),
                                timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def test_history_replay_reads_the_pods_back_with_their_times(scene):
    lab, ns, tmp, start = scene["lab"], scene["ns"], scene["tmp"], scene["start"]
    report = tmp / "report"
    run = playbook.run(os.path.join(TOP, "playbooks", "whatif_cluster.yml"), cwd=tmp, timeout=300,
                       extra_vars={"whatif_cluster_prometheus_url": lab.prometheus_url,
                                   "whatif_cluster_start": "%d" % start, "whatif_cluster_end": "%d" % scene["end"],
                                   "whatif_cluster_step": "%ds" % STEP,
                                   "whatif_cluster_strategies": ["exclusive", "fractional"],
                                   "whatif_cluster_scoring": ["best-fit"], "whatif_cluster_namespaces": [ns],
                                   "whatif_cluster_seeds": [42], "whatif_cluster_pool": {"gpus_per_node": 2},
                                   "whatif_cluster_report": str(report),
                                   "ansible_python_interpreter": sys.executable})
    hist = run.result("Read the GPU pods of the window from kube-state-metrics")
    assert hist["window"]["seconds"] == WINDOW, hist["window"]
    mine = dict((p["name"].split("/", 1)[1], p) for p in hist["pods"] if p["namespace"] == ns)
    print("history e2e: %s; h-short deleted %.1f s / gone %.1f s, h-late created %.1f-%.1f s into the window"
          % (dict((k, (p["creation_time"], p["deletion_time"], p["num_gpu"], p["gpu_milli"], p["qos"]))
                  for k, p in sorted(mine.items())), scene["t_del"] - start, scene["t_gone"] - start,
             scene["t_create"] - start, scene["t_created"] - start))
    assert sorted(mine) == ["h-late", "h-mig-a", "h-mig-b", "h-run", "h-short"], sorted(mine)
    shape = dict((k, (p["num_gpu"], p["gpu_milli"], p["qos"])) for k, p in mine.items())
    assert shape == {"h-run": (2, 1000, scene["prio"]), "h-mig-a": (1, 428, ""), "h-mig-b": (1, 428, ""),
                     "h-short": (1, 1000, ""), "h-late": (1, 1000, "")}, shape
    for name in ("h-run", "h-mig-a", "h-mig-b"):
        p = mine[name]
        assert (p["creation_time"], p["deletion_time"], p["running_at_end"]) == (0, WINDOW, True), p
    short, late = mine["h-short"], mine["h-late"]
    assert short["creation_time"] == 0 and not short["running_at_end"], short
    lo, hi = scene["t_del"] - start - SCRAPE, scene["t_gone"] - start + LAG + STEP
    assert lo <= short["deletion_time"] <= hi, (lo, hi, short)
    lo, hi = scene["t_create"] - start - 1, scene["t_created"] - start
    assert lo <= late["creation_time"] <= hi, (lo, hi, late)
    assert late["deletion_time"] == WINDOW and late["running_at_end"], late
    # the pod list written beside the report, in the trace's columns, read back
    with open(str(report / "pods.csv")) as f:
        rows = dict((r["name"], r) for r in csv.DictReader(f))
    assert float(rows[ns + "/h-mig-a"]["gpu_milli"]) == 428 and rows[ns + "/h-run"]["qos"] == scene["prio"], rows
    # GPUs needed per strategy (the hand-worked figures in the module's docstring) and the report's picture
    whatif = run.result("Replay the history under each strategy with the capacity search")
    caps = dict((k, (v["gpus"], v["met"])) for k, v in whatif["capacity"].items())
    assert caps == {"exclusive": (6, True), "fractional": (4, True)}, caps
    with open(whatif["report"]["path"]) as f:
        text = f.read()
    assert "## GPUs needed at the service target" in text and "whatif-capacity.svg" in text, text[:2000]
    assert os.path.isfile(str(report / "whatif-capacity.svg"))
