"""Kueue and DRA on a real control plane (docs/tenancy.md): one cluster of their own for this file.

Kueue (the controller-manager built from sigs.k8s.io/kueue by ``hack/k8s/build.sh kueue``, its CRDs and
webhooks from the same module): the gpuops.k8s.gpu_tenancy + gpu_queueing roles make two tenants in
one cohort from one tenant spec; tenant A borrows tenant B's idle MIG slices; B submits and A's
borrowed workload is preempted; a workload asking for a flavor nobody offers stays pending with
Kueue's reason; a nominal quota over capacity is refused before anything changes.

DRA (resource.k8s.io/v1): the simulated hosts' gpu_info facts become ResourceSlices on their kwok
nodes (device_plugin with gpu_allocation: dra), the real kube-scheduler allocates ResourceClaims from
templates for ``mig-1g.10gb`` and whole GPUs and binds the pods to the right nodes; a claim beyond the
tenant's DRA quota (gpu_tenancy_dra_quotas) is refused by the API server.

This file starts its own cluster (not the session one): Kueue's webhooks intercept every Job while it
runs, and the flavors are computed from all the cluster's nodes.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib import cluster as cluster_lib
from lib import gpu_nodes, playbook
from lib.wait import nodes_schedulable, wait_for

TOP = cluster_lib.TOP
STATE_DIR = os.path.join(TOP, ".cache", "k8s-e2e-queueing")
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
CLASSES = {"gpu-high": {"value": 100000, "preemption_policy": "PreemptLowerPriority",
                        "description": "production"},
           "gpu-low": {"value": 1000, "preemption_policy": "Never", "description": "preemptible"}}
TENANTS = [
    {"name": "team-a", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 3}},
     "queueing": {"borrowing_limit": {"nvidia.com/mig-1g.10gb": 4}}},
    {"name": "team-b", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 4, "requests.nvidia.com/gpu": 2}}},
]

PLAYBOOK = playbook.localhost_yaml("Tenants, then their Kueue queues", """\
  tasks:
    - name: Namespaces (Kueue admits the GPU workloads, so no GPU ResourceQuota)
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_tenancy}
      vars: {gpu_tenancy_gpu_quotas: false}
      when: "'gpu_tenancy' in roles_to_run"
    - name: Kueue
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_queueing}
      when: "'gpu_queueing' in roles_to_run"
""")

DRA_PLAYBOOK = """\
- name: The simulated hosts' GPUs
  hosts: sim
  gather_facts: false
  tasks:
    - name: Simulated host
      gpuops.k8s.nvml_simulator: {path: "{{ sim_state }}", gpus: "{{ sim_gpus }}"}
    - name: MIG layout
      gpuops.k8s.mig_partition: {simulator: "{{ sim_state }}", layout: "{{ sim_layout }}"}
      when: sim_layout is defined
    - name: GPU facts
      gpuops.k8s.gpu_info: {simulator: "{{ sim_state }}", diagram: false}
      register: facts
    - name: What the node's ResourceSlice is made from
      ansible.builtin.set_fact:
        slice_item: {node: "{{ inventory_hostname }}", gpu_info: "{{ facts }}"}

""" + playbook.localhost_yaml("DRA instead of the device plugin, and the tenant with its claim quota", """\
  tasks:
    - name: DeviceClasses and ResourceSlices
      ansible.builtin.include_role: {name: gpuops.k8s.device_plugin}
      vars:
        device_plugin_gpu_allocation: dra
        device_plugin_dra_profiles: [1g.10gb, 3g.40gb]
        device_plugin_dra_resource_slices: "{{ groups['sim'] | map('extract', hostvars, 'slice_item') | list }}"
    - name: Tenant with DRA claim quotas
      ansible.builtin.include_role: {name: gpuops.k8s.gpu_tenancy}
      vars: {gpu_tenancy_dra_quotas: true, gpu_tenancy_capacity_check: false}  # DRA devices are no node allocatable
""")


def _ansible(kubeconfig, tmp_path, plays, variables, inventory="localhost,", check=False):
    return playbook.run(playbook.write(tmp_path, plays), inventory=inventory, kubeconfig=kubeconfig, cwd=tmp_path,
                        extra_vars=variables, check=check, timeout=600, expect_rc=None)


@pytest.fixture(scope="module")
def cluster():
    if os.environ.get("GPUOPS_SKIP_E2E") == "1":
        pytest.skip("GPUOPS_SKIP_E2E=1: e2e tests opted out explicitly")
    try:
        binaries = cluster_lib.bin_dir()
    except cluster_lib.ClusterError as e:
        pytest.fail("the local control plane is not built: %s" % e, pytrace=False)
    # no pod-complete stage: kwok would finish Job pods at once, and a finished workload is never preempted
    stages = tuple(st for st in cluster_lib.KWOK_STAGES if not st.endswith("pod-complete.yaml"))
    local = cluster_lib.LocalCluster(STATE_DIR, binaries=binaries, kwok_stages=stages)
    try:
        local.start()
    except cluster_lib.ClusterError as e:
        pytest.fail("cannot start the control plane: %s (logs: %s)" % (e, local.log_dir), pytrace=False)
    try:
        yield local
    finally:
        local.stop(keep_logs=True)


@pytest.fixture(scope="module")
def kueue(cluster):
    """Kueue on the cluster. Kueue is an optional build (hack/k8s/build.sh kueue): when it is not built the Kueue
    tests are SKIPPED saying so (nothing counts as passed), or fail with GPUOPS_E2E_KUEUE=1."""
    check = subprocess.run([cluster_lib.BUILD_SCRIPT, "--check", "kueue"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, check=False)
    if check.returncode != 0:
        msg = "Kueue is not built (optional component): %s; run hack/k8s/build.sh kueue" % check.stderr.strip()
        if os.environ.get("GPUOPS_E2E_KUEUE") == "1":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    try:
        cluster.start_kueue()
    except cluster_lib.ClusterError as e:
        pytest.fail("cannot start Kueue: %s (logs: %s)" % (e, cluster.log_dir), pytrace=False)
    return cluster


@pytest.fixture(scope="module")
def api(cluster):
    from kubernetes import config
    c = config.new_client_from_config(cluster.kubeconfig)
    return {"core": client.CoreV1Api(c), "batch": client.BatchV1Api(c), "custom": client.CustomObjectsApi(c),
            "client": c}


# --------------------------------------------------------------------------------------------- Kueue

def _job(name, ns, profile_res, pods, priority):
    limits = {profile_res: "1"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": "gpu", "kueue.x-k8s.io/priority-class": priority}},
            "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                     "template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                                           "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                                           "resources": {"limits": limits, "requests": limits}}]}}}}


def _workload(custom, ns, job):
    wls = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "workloads")["items"]
    for wl in wls:
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def _cond(wl, ctype):
    for c in (wl or {}).get("status", {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return None


def _wl_with(custom, ns, job, ctype, status=None):
    """The workload of ``job`` once its condition ``ctype`` has ``status`` (any status with a message if None)."""
    wl = _workload(custom, ns, job)
    cond = _cond(wl, ctype)
    if cond is None:
        return None
    if status is None:
        return wl if cond.get("message") else None
    return wl if cond["status"] == status else None


def _pods_running(core, ns, selector, count):
    pods = core.list_namespaced_pod(ns, label_selector=selector).items
    return pods if len(pods) == count and all(p.status.phase == "Running" for p in pods) else None


def _running_node(core, ns, name):
    pod = core.read_namespaced_pod(name, ns)
    return pod.spec.node_name if pod.status.phase == "Running" else None


def _cq_usage(custom, cq, flavor):
    st = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", cq).get("status") or {}
    for f in st.get("flavorsUsage") or []:
        if f["name"] == flavor:
            return dict((r["name"], r) for r in f["resources"])
    return {}


@pytest.fixture(scope="module")
def kueue_tenants(kueue, cluster, api, tmp_path_factory):
    core = api["core"]
    gpu_nodes.ensure_node(core, "kq-a100", gpus=[{"model": "a100_80gb", "count": 1}], mig_strategy="mixed",
                          mig_config={"1g.10gb": 7}, labels={"e2e-kueue": "1"})
    gpu_nodes.ensure_node(core, "kq-h100", gpus=[{"model": "h100_80gb", "count": 2}], labels={"e2e-kueue": "1"})
    nodes_schedulable(core, "e2e-kueue=1", 2)
    tmp = tmp_path_factory.mktemp("kueue")
    variables = {"gpu_tenancy_tenants": TENANTS, "gpu_tenancy_priority_classes": CLASSES,
                 "roles_to_run": ["gpu_tenancy", "gpu_queueing"]}
    t0 = time.time()
    run = _ansible(cluster.kubeconfig, tmp, PLAYBOOK, variables)
    assert run.ok, run.explain()
    return {"tmp": tmp, "variables": variables, "first_run_s": time.time() - t0}


def test_roles_make_the_kueue_objects_idempotently(cluster, api, kueue_tenants):
    custom = api["custom"]
    flavors = dict((f["metadata"]["name"], f) for f in
                   custom.list_cluster_custom_object(GROUP, VERSION, "resourceflavors")["items"])
    assert flavors["mig-1g.10gb"]["spec"]["nodeLabels"] == {"nvidia.com/mig.strategy": "mixed"}
    assert flavors["gpu-nvidia-h100-80gb-hbm3"]["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    cq = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", "team-a")
    assert cq["spec"]["cohortName"] == "gpu-tenants"
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    lq = custom.get_namespaced_custom_object(GROUP, VERSION, "team-b", "localqueues", "gpu")
    assert lq["spec"]["clusterQueue"] == "team-b"
    wpc = custom.get_cluster_custom_object(GROUP, VERSION, "workloadpriorityclasses", "gpu-high")
    assert wpc["value"] == 100000
    # Kueue itself accepted the queues: both active
    wait_for(lambda: all(_cond(custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", t["name"]),
                               "Active").get("status") == "True" for t in TENANTS), 60, what="ClusterQueues Active")
    # no GPU ResourceQuota in the tenant namespaces (Kueue admits instead)
    assert not [q for q in api["core"].list_namespaced_resource_quota("team-a").items
                if any("nvidia.com/" in k for k in (q.spec.hard or {}))]
    run = _ansible(cluster.kubeconfig, kueue_tenants["tmp"], PLAYBOOK, kueue_tenants["variables"])
    assert run.ok, run.explain()
    assert run.changed() == []
    run = _ansible(cluster.kubeconfig, kueue_tenants["tmp"], PLAYBOOK,
                   dict(kueue_tenants["variables"], roles_to_run=["gpu_queueing"]), check=True)
    assert run.ok, run.explain()
    assert run.changed() == []


def test_capacity_over_the_flavor_is_refused_before_any_change(cluster, api, kueue_tenants):
    over = json.loads(json.dumps(TENANTS))
    over[0]["quota"]["hard"]["requests.nvidia.com/mig-1g.10gb"] = 5  # 5 + 4 > 7 slices on kq-a100
    run = _ansible(cluster.kubeconfig, kueue_tenants["tmp"], PLAYBOOK,
                   dict(kueue_tenants["variables"], gpu_tenancy_tenants=over, roles_to_run=["gpu_queueing"]))
    assert not run.ok
    assert "mig-1g.10gb (nvidia.com/mig-1g.10gb): tenants 9 > nodes offer 7 (team-a=5, team-b=4)" in " | ".join(run.failures())
    cq = api["custom"].get_cluster_custom_object(GROUP, VERSION, "clusterqueues", "team-a")
    mig = [g for g in cq["spec"]["resourceGroups"] if g["coveredResources"] == ["nvidia.com/mig-1g.10gb"]][0]
    assert mig["flavors"][0]["resources"][0]["nominalQuota"] in (3, "3")


def test_borrow_then_reclaim_by_preemption(cluster, api, kueue_tenants):
    batch, custom, core = api["batch"], api["custom"], api["core"]
    # A asks for 6 slices: 3 nominal + 3 borrowed from B's idle 4; created unsuspended, Kueue's webhook suspends it
    batch.create_namespaced_job("team-a", _job("a-burst", "team-a", "nvidia.com/mig-1g.10gb", 6, "gpu-low"))
    job = batch.read_namespaced_job("a-burst", "team-a")
    assert job.spec.suspend is True, "Kueue's Job webhook did not suspend the queued Job"
    wl = wait_for(lambda: _wl_with(custom, "team-a", "a-burst", "Admitted", "True"), 90,
                  what="team-a workload admitted")
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"nvidia.com/mig-1g.10gb": "mig-1g.10gb"}
    usage = wait_for(lambda: _cq_usage(custom, "team-a", "mig-1g.10gb")
                     if str(_cq_usage(custom, "team-a", "mig-1g.10gb").get("nvidia.com/mig-1g.10gb", {}).get("total"))
                     == "6" else None, 60, what="team-a using 6 slices")
    assert str(usage["nvidia.com/mig-1g.10gb"]["total"]) == "6"
    assert str(usage["nvidia.com/mig-1g.10gb"]["borrowed"]) == "3"
    # the admitted pods run on the node of the flavor (its node label was injected as a node selector)
    pods = wait_for(lambda: _pods_running(core, "team-a", "job-name=a-burst", 6), 90, what="6 pods of a-burst")
    assert set(p.spec.node_name for p in pods) == {"kq-a100"}
    assert pods[0].spec.node_selector == {"nvidia.com/mig.strategy": "mixed"}

    # B claims its nominal 4: only 1 slice is free, so Kueue reclaims what A borrowed
    batch.create_namespaced_job("team-b", _job("b-claim", "team-b", "nvidia.com/mig-1g.10gb", 4, "gpu-low"))
    evicted = wait_for(lambda: _wl_with(custom, "team-a", "a-burst", "Preempted", "True"), 90,
                       what="team-a workload preempted")
    assert _cond(evicted, "Preempted")["reason"] == "InCohortReclamation", _cond(evicted, "Preempted")
    wait_for(lambda: (_cond(_workload(custom, "team-b", "b-claim"), "Admitted") or {}).get("status") == "True",
             90, what="team-b workload admitted")
    wait_for(lambda: batch.read_namespaced_job("a-burst", "team-a").spec.suspend is True, 60,
             what="a-burst suspended again")
    # A's 6 no longer fit (3 nominal + at most 0 to borrow): it waits for quota
    # Kueue words it two ways: "couldn't assign flavors ... insufficient unused quota" once it re-evaluates the
    # workload, or "Workload no longer fits after processing another workload" in the cycle where B took the quota
    # (seen in CI); both say that A waits for quota, and any other reason fails
    wl = wait_for(lambda: _wl_with(custom, "team-a", "a-burst", "QuotaReserved", "False"), 60, what="a-burst pending")
    message = _cond(wl, "QuotaReserved")["message"].lower()
    assert "insufficient" in message or "no longer fits" in message, message


def test_flavor_nobody_offers_stays_pending_with_kueues_reason(api, kueue_tenants):
    batch, custom = api["batch"], api["custom"]
    batch.create_namespaced_job("team-a", _job("a-3g", "team-a", "nvidia.com/mig-3g.40gb", 1, "gpu-high"))
    wl = wait_for(lambda: _wl_with(custom, "team-a", "a-3g", "QuotaReserved"), 60, what="a-3g workload evaluated")
    cond = _cond(wl, "QuotaReserved")
    assert cond["status"] == "False"
    assert "resource nvidia.com/mig-3g.40gb unavailable in ClusterQueue" in cond["message"], cond
    assert batch.read_namespaced_job("a-3g", "team-a").spec.suspend is True


# ----------------------------------------------------------------------------------------------- DRA

DRA_TENANT = {"name": "dra-t", "quota": {"hard": {"requests.nvidia.com/mig-1g.10gb": 2, "requests.nvidia.com/gpu": 1}}}
DRA_HOSTS = {  # Hopper applies MIG mode at once (an A100 would need a GPU reset first)
    "dra-h100": {"sim_gpus": [{"model": "h100_80gb", "count": 1}],
                 "sim_layout": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]},
    "dra-a100": {"sim_gpus": [{"model": "a100_80gb", "count": 2}]},
}


@pytest.fixture(scope="module")
def dra_setup(cluster, api, tmp_path_factory):
    core = api["core"]
    for name in DRA_HOSTS:
        gpu_nodes.plain_node(core, name, labels={"e2e-dra": "1"})
    nodes_schedulable(core, "e2e-dra=1", 2)
    tmp = tmp_path_factory.mktemp("dra")
    inv = {"all": {"children": {"sim": {"hosts": dict(
        (h, dict(v, ansible_connection="local", ansible_python_interpreter=sys.executable,
                 sim_state=str(tmp / ("%s.json" % h)))) for h, v in DRA_HOSTS.items())}}}}
    (tmp / "hosts.json").write_text(json.dumps(inv))
    variables = {"gpu_tenancy_tenants": [DRA_TENANT], "gpu_tenancy_priority_classes": CLASSES}
    run = _ansible(cluster.kubeconfig, tmp, DRA_PLAYBOOK, variables, inventory=str(tmp / "hosts.json"))
    assert run.ok, run.explain()
    return {"tmp": tmp}


def _dyn(api):
    from kubernetes import dynamic
    return dynamic.DynamicClient(api["client"])


def test_resource_slices_and_device_classes_published(api, dra_setup):
    dyn = _dyn(api)
    slices = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceSlice").get().to_dict()["items"]
    by_node = dict((s["spec"]["nodeName"], s) for s in slices)
    mig = by_node["dra-h100"]["spec"]["devices"]
    assert len(mig) == 7 and all(d["attributes"]["profile"]["string"] == "1g.10gb" for d in mig)
    assert all(d["attributes"]["uuid"]["string"].startswith("MIG-") for d in mig)
    whole = by_node["dra-a100"]["spec"]["devices"]
    assert [d["attributes"]["type"]["string"] for d in whole] == ["gpu", "gpu"]
    assert whole[0]["attributes"]["productName"]["string"].startswith("NVIDIA A100")
    classes = [c["metadata"]["name"] for c in
               dyn.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass").get().to_dict()["items"]]
    assert {"gpu.nvidia.com", "mig.nvidia.com", "mig-1g.10gb.nvidia.com", "mig-3g.40gb.nvidia.com"} <= set(classes)
    hard = api["core"].read_namespaced_resource_quota("gpu-quota", "dra-t").spec.hard
    assert hard["mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices"] == "2"
    assert hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "1"


def _claim_template(name, device_class):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": device_class, "allocationMode": "ExactCount", "count": 1}}]}}}}


def _claim_pod(name, template):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"e2e-dra": "1"},
                     "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_claims_allocated_by_the_scheduler_and_quota_refuses_one_more(api, dra_setup):
    core = api["core"]
    dyn = _dyn(api)
    tmpl = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaimTemplate")
    tmpl.create(body=_claim_template("mig1g", "mig-1g.10gb.nvidia.com"), namespace="dra-t")
    tmpl.create(body=_claim_template("whole", "gpu.nvidia.com"), namespace="dra-t")
    for name, template in (("mig-0", "mig1g"), ("mig-1", "mig1g"), ("full-0", "whole")):
        core.create_namespaced_pod("dra-t", _claim_pod(name, template))
    placed = {}
    for name in ("mig-0", "mig-1", "full-0"):
        placed[name] = wait_for(lambda n=name: _running_node(core, "dra-t", n), 90, what="%s Running" % name)
    assert placed == {"mig-0": "dra-h100", "mig-1": "dra-h100", "full-0": "dra-a100"}
    claims = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").get(
        namespace="dra-t").to_dict()["items"]
    results = dict((c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] + "@" +
                    c["metadata"]["ownerReferences"][0]["name"], c["status"]["allocation"]["devices"]["results"][0])
                   for c in claims)
    assert results["gpu@mig-0"]["pool"] == "dra-h100" and results["gpu@mig-0"]["device"].startswith("gpu-0-mig-")
    assert results["gpu@mig-0"]["device"] != results["gpu@mig-1"]["device"]
    assert results["gpu@full-0"]["pool"] == "dra-a100" and results["gpu@full-0"]["driver"] == "gpu.nvidia.com"
    # a third mig-1g.10gb claim: the quota (2) is used up by the two pods' claims
    claim = _claim_template("extra", "mig-1g.10gb.nvidia.com")
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "extra"},
             "spec": claim["spec"]["spec"]}
    with pytest.raises(ApiException) as e:
        dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim").create(body=claim, namespace="dra-t")
    assert e.value.status == 403
    assert "exceeded quota: gpu-quota" in e.value.body
    assert "mig-1g.10gb.nvidia.com.deviceclass.resource.k8s.io/devices" in e.value.body
