"""Right-sizing from measured use on the real metric path (docs/rightsize.md): a tenant's pods hold mig-3g.40gb
slices of kwok A100 80GB nodes and never use more than 9 GB (the simulated DCGM exporter's fb_curve; each pod its
own curve, the largest 7-9 GB) -> the real
Prometheus -> gpuops.k8s.gpu_rightsize (ansible-playbook) recommends 1g.10gb and writes a demand file; gpu_plan with
current_configs on that file needs fewer GPUs. The closed loop's playbooks/replan.yml with replan_prometheus_url does
the same in one run and frees the GPU (docs/closed-loop.md). A bad URL and a missing metric fail with clear errors.

The test cannot wait 24 h: it uses window 5m and min_history 20s (the rule is the same; only the durations shrink),
and headroom 10 % (a 7-9 GB saw-tooth has a p95 near 9 GB: +20 % would need 10.7 GB, a 1g.20gb).
"""
import os
import sys

import pytest
import yaml
from kubernetes import client

from lib import metrics_lab, playbook
from lib.wait import wait_for

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLICE = "nvidia.com/mig-3g.40gb"
PLAYBOOK = playbook.localhost_yaml("Right-size and re-plan", """\
  tasks:
    - name: Plan
      gpuops.k8s.gpu_plan: {nodes: "{{ nodes }}", demand: "{{ demand }}", bound: false}
      register: plan1
    - name: Rightsize
      gpuops.k8s.gpu_rightsize:
        prometheus_url: "{{ url }}"
        demand: "{{ demand }}"
        plan: "{{ plan1.plan }}"
        window: 5m
        step: 2s
        min_history: 20s
        headroom_pct: 10
        demand_out: "{{ out }}"
      register: rs
    - name: Replan
      gpuops.k8s.gpu_plan:
        nodes: "{{ nodes }}"
        demand: "{{ (lookup('ansible.builtin.file', out) | from_yaml).demand }}"
        current_configs: "{{ plan1.plan.mig_parted_config }}"
        bound: false
      register: plan2
    - name: Bad URL
      gpuops.k8s.gpu_rightsize: {prometheus_url: "{{ url }}/nothing-here", demand: "{{ demand }}", demand_out: "{{ out }}.bad"}
      ignore_errors: true
    - name: Missing metric
      gpuops.k8s.gpu_rightsize: {prometheus_url: "{{ url }}", demand: "{{ demand }}", memory_metric: DCGM_FI_DEV_FB_RESERVED,
                                 window: 5m, demand_out: "{{ out }}.bad"}
      ignore_errors: true
""")


@pytest.fixture(scope="module")
def lab(k8s_cluster, tmp_path_factory):
    with metrics_lab.kwok_lab(k8s_cluster, tmp_path_factory, "rightsize", {"3g.40gb": 2}) as lab:
        yield lab


def test_rightsize_frees_gpus_and_errors_are_clear(k8s_cluster, lab, namespace):
    apps = client.AppsV1Api(k8s_cluster.api_client())
    name = "embedder"
    apps.create_namespaced_deployment(namespace, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"nodeSelector": lab["sel"], "terminationGracePeriodSeconds": 0,
                                       "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10",
                                                       "resources": {"limits": {SLICE: "1"}, "requests": {SLICE: "1"}}}]}}}})
    # the pods use their slices differently: one a 7-9 GB saw-tooth over 30 s, one a 4-6 GB one, the other two a flat
    # 3 GB; the item is sized for its largest pod (p95 and peak are the largest over its pods)
    core = client.CoreV1Api(k8s_cluster.api_client())

    def running():
        pods = [p.metadata.name for p in core.list_namespaced_pod(namespace).items
                if p.metadata.name.startswith(name + "-") and p.status.phase == "Running"]
        return sorted(pods) if len(pods) == 4 else None

    pods = wait_for(running, timeout=90, what="the 4 %s pods running" % name)
    lab["lab"].put_load({"rules": [
        {"namespace": namespace, "pod_prefix": pods[0], "gpu": 30,
         "fb_curve": [[0, 7168], [15, 9216], [30, 7168], [45, 9216], [600, 9216]]},
        {"namespace": namespace, "pod_prefix": pods[1], "gpu": 20,
         "fb_curve": [[0, 4096], [15, 6144], [30, 4096], [45, 6144], [600, 6144]]},
        {"namespace": namespace, "pod_prefix": name + "-", "gpu": 10, "fb_used_mib": 3072}]})
    q = 'count_over_time(DCGM_FI_DEV_FB_USED{exported_namespace="%s"}[5m])' % namespace
    wait_for(lambda: len([r for r in lab["lab"].query(q) if float(r["value"][1]) >= 15]) == 4 or None, timeout=90,
             what="30 s of framebuffer samples of the 4 pods in Prometheus")
    peak = 'max(max_over_time(DCGM_FI_DEV_FB_USED{exported_namespace="%s"}[5m]))' % namespace
    wait_for(lambda: any(float(r["value"][1]) >= 8704 for r in lab["lab"].query(peak)) or None, timeout=60,
             what="the saw-tooth pod's peak (8.5 GB or more) in Prometheus")
    nodes = [{"name": n, "gpus": [{"model": "a100_80gb", "count": 1}], "current": {"3g.40gb": 2}} for n in lab["nodes"]]
    demand = [{"tenant": namespace, "name": name, "replicas": 4, "memory_gb": 40, "kind": "inference",
               "isolation": "strict"}]
    tmp = lab["tmp"]
    out = str(tmp / "demand-rightsized.yml")
    run = playbook.run(playbook.write(tmp, PLAYBOOK), cwd=tmp, timeout=300,
                       extra_vars={"nodes": nodes, "demand": demand, "url": lab["lab"].prometheus_url, "out": out})
    res = dict((name, r) for name, r in run.results())
    item = res["Rightsize"]["items"][0]
    assert 8.5 <= item["observed"]["memory_gb_peak"] <= 9.0, item
    assert item["after"]["profile"] == "1g.10gb" and item["before"]["profile"] == "3g.40gb", item["reason"]
    assert res["Rightsize"]["changes"][0]["field"] == "memory_gb" and res["Rightsize"]["changes"][0]["before"] == 40
    with open(out) as f:
        written = yaml.safe_load(f)
    assert written["demand"][0]["memory_gb"] == item["after"]["memory_gb"] <= 10
    before, after = res["Plan"]["plan"]["summary"]["gpus_used"], res["Replan"]["plan"]["summary"]["gpus_used"]
    print("rightsize e2e: %s; GPUs used %d -> %d" % (item["reason"], before, after))
    assert (before, after) == (2, 1), (before, after)  # 4 x 3g.40gb take two A100s; 4 x 1g.10gb fit on one
    bad = res["Bad URL"]
    assert bad["failed"] and "not a Prometheus API" in bad["msg"] and "/nothing-here" in bad["msg"], bad["msg"]
    missing = res["Missing metric"]
    assert missing["failed"] and "no series of DCGM_FI_DEV_FB_RESERVED" in missing["msg"], missing["msg"]
    assert not os.path.exists(out + ".bad")

    # the closed loop: replan.yml right-sizes from the same history and re-plans (report only) - one GPU freed
    loop = playbook.run(os.path.join(TOP, "playbooks", "replan.yml"), cwd=tmp, timeout=300, kubeconfig=k8s_cluster.kubeconfig,
                        extra_vars={"replan_nodes": nodes, "replan_demand": demand, "replan_namespaces": [namespace],
                                    "replan_prometheus_url": lab["lab"].prometheus_url, "replan_rightsize_window": "5m",
                                    "replan_rightsize_step": "2s", "replan_rightsize_min_history": "20s",
                                    "replan_rightsize_headroom_pct": 10, "replan_disruption_budget": 2,
                                    "replan_output_dir": str(tmp / "replan-out"),
                                    "ansible_python_interpreter": sys.executable})
    sized = loop.result("Right-size the demand from measured GPU use (DCGM history in Prometheus)")
    assert sized["changes"][0]["field"] == "memory_gb" and sized["demand"][0]["memory_gb"] <= 10, sized["changes"]
    pend = loop.result("Add the GPU pods the scheduler cannot place to the demand")["ansible_facts"]["replan_pending"]
    assert pend["pending"] == [] and pend["demand"] == sized["demand"], pend
    replanned = loop.result("Re-plan with the current layouts and the disruption budget")["plan"]["summary"]
    print("replan.yml with right-sizing: GPUs used %d -> %d, reconfigured %d" % (
        before, replanned["gpus_used"], replanned["reconfigured_gpus"]))
    assert replanned["gpus_used"] == 1 and replanned["reconfigured_gpus"] <= 2, replanned
