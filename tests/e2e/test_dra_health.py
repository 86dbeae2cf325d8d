"""Health per device on a dra-dynamic node, on the real control plane (docs/dra.md, "Health per device").

A kwok node with four simulated H100s publishes the slices of NVIDIA's DRA driver with DynamicMIG
(``dra_resource_slices``). Two pods hold a 1g.10gb claim each, one on GPU 2 and one on GPU 3 (the claims select the
GPU by the devices' ``parentIndex`` attribute). An uncorrectable-ECC alert for GPU 3 goes through
``playbooks/health.yml`` exactly as the EDA rulebook hands it over (``gpu_health_alert``; the host is
``device_plugin_gpu_allocation: dra-dynamic``): the collection creates NoExecute DeviceTaintRules on GPU 3's 26
devices and does not cordon the node; the kube-controller-manager's device taint eviction controller (on in
v1.37.2: DRADeviceTaints and DRADeviceTaintRules GA, the lab runs ``--controllers=*``) evicts the pod on GPU 3 only.
The resolved alert (``gpu_health_uncordon_after: 1``) deletes the rules.
"""
import datetime
import sys
import time

import pytest
import yaml
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.k8s.plugins.module_utils.sim import state as sim_state
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic
from lib import playbook
from lib.wait import wait_for

API = "resource.k8s.io/v1"
GROUP = "dra_health_e2e"


def _res(dyn, kind):
    return dyn.resources.get(api_version=API, kind=kind)


def _facts(n):
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
        {"index": i, "model": "h100_80gb", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-e2e-health-%d" % i,
         "memory_total_mib": 81559, "mig_mode_current": True, "instances": []} for i in range(n)]}


@pytest.fixture
def health_node(k8s_cluster, kwok_nodes, namespace, unique, tmp_path):
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(k8s_cluster.api_client())
    node = kwok_nodes("e2e-dynh-" + unique, labels={"e2e-dra-health": unique})
    made = []
    try:
        for s in gpu_dra_dynamic.resource_slices(node, _facts(4)):
            made.append(("ResourceSlice", _res(dyn, "ResourceSlice").create(body=s).metadata.name))
        cls = "e2e-gpu-" + unique
        mig = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
        made.append(("DeviceClass", _res(dyn, "DeviceClass").create(body={
            "apiVersion": API, "kind": "DeviceClass", "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": mig}}]}}).metadata.name))
        sim = tmp_path / "sim.json"
        sim_state.save_state(str(sim), sim_state.new_state([{"model": "h100_80gb", "count": 4}], seed=3))
        inventory = tmp_path / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {GROUP: {"hosts": {node: {
                "gpuops_simulator": str(sim), "gpuops_k8s_node_name": node, "gpu_health_kernel_log_source": "none",
                "device_plugin_gpu_allocation": "dra-dynamic"}}}}}}))
        yield {"dyn": dyn, "core": k8s_cluster.core, "ns": namespace, "node": node, "unique": unique, "cls": cls,
               "inventory": inventory, "kubeconfig": k8s_cluster.kubeconfig, "tmp": tmp_path}
    finally:
        for rule in _res(dyn, "DeviceTaintRule").get(label_selector="gpuops.k8s/health-node=" + node).items:
            _res(dyn, "DeviceTaintRule").delete(name=rule.metadata.name)
        for kind, name in reversed(made):
            try:
                _res(dyn, kind).delete(name=name)
            except ApiException:
                pass


def _pod_on_gpu(env, gpu):
    dyn, core, ns = env["dyn"], env["core"], env["ns"]
    name = "on-gpu-%d" % gpu
    _res(dyn, "ResourceClaim").create(namespace=ns, body={
        "apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": env["cls"], "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression":
                                   "device.attributes['gpu.nvidia.com'].type == 'mig' && "
                                   "device.attributes['gpu.nvidia.com'].profile == '1g.10gb' && "
                                   "device.attributes['gpu.nvidia.com'].parentIndex == %d" % gpu}}]}}]}}})
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"e2e-dra-health": env["unique"]},
                 "resourceClaims": [{"name": "mig", "resourceClaimName": name}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"claims": [{"name": "mig"}]}}]}})
    return name


def _alert(env, status):
    return {"status": status, "fingerprint": "e2e-ecc-gpu3-" + env["unique"],
            "startsAt": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
            "labels": {"alertname": "GpuEccUncorrectedErrors", "node": env["node"], "gpu": "3"},
            "annotations": {"value": "25"}}


def _health(env, status):
    run = playbook.run("playbooks/health.yml", inventory=str(env["inventory"]), kubeconfig=env["kubeconfig"],
                       extra_vars={"gpu_health_alert": _alert(env, status), "gpu_health_dry_run": False,
                                   "target": GROUP, "gpu_health_node_selector": "e2e-dra-health=" + env["unique"],
                                   "gpu_health_max_unhealthy_fraction": 1.0, "gpu_health_uncordon_after": 1},
                       timeout=300, expect_rc=None)
    assert run.ok, run.explain()
    return run


def _running(core, ns, name):
    try:
        pod = core.read_namespaced_pod(name, ns)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None


def test_ecc_fault_on_gpu3_evicts_the_pod_on_gpu3_only_and_recovery_removes_the_taints(health_node):
    env = health_node
    dyn, core, ns, node = env["dyn"], env["core"], env["ns"], env["node"]
    pods = dict((gpu, _pod_on_gpu(env, gpu)) for gpu in (2, 3))
    for name in pods.values():
        wait_for(lambda n=name: _running(core, ns, n), 90, what="%s Running" % name)
    devices = dict((gpu, _res(dyn, "ResourceClaim").get(name=pods[gpu], namespace=ns).to_dict()
                    ["status"]["allocation"]["devices"]["results"][0]["device"]) for gpu in (2, 3))
    # first fit in slice order: each claim's first 1g.10gb placement of its GPU
    assert devices == {2: "gpu-2-mig-1g10gb-19-0", 3: "gpu-3-mig-1g10gb-19-0"}

    t0 = time.time()
    _health(env, "firing")
    t1 = time.time()
    # the kube-controller-manager evicts the pod whose claim uses a NoExecute device; the other keeps running
    wait_for(lambda: not _running(core, ns, pods[3]), 60, what="the pod on GPU 3 evicted")
    t2 = time.time()
    time.sleep(3)  # the controller handles every claim of the tainted devices together: give it time to be wrong
    assert _running(core, ns, pods[2]), "the pod on GPU 2 must keep running"
    rules = _res(dyn, "DeviceTaintRule").get(label_selector="gpuops.k8s/health-node=" + node).to_dict()["items"]
    tainted = sorted(r["spec"]["deviceSelector"]["device"] for r in rules)
    # GPU 3's whole-GPU device and its 25 MIG placements (H100: 7 + 7 + 4 + 3 + 2 + 1 + 1), nothing of GPU 2
    assert len(tainted) == 26 and "gpu-3" in tainted and devices[3] in tainted
    assert all(d == "gpu-3" or d.startswith("gpu-3-mig-") for d in tainted)
    assert set((r["spec"]["taint"]["key"], r["spec"]["taint"]["effect"]) for r in rules) == {
        ("gpuops.k8s/gpu-health", "NoExecute")}
    assert set(r["spec"]["deviceSelector"]["pool"] for r in rules) == {node}
    n = core.read_node(node)
    assert not n.spec.unschedulable  # not cordoned: GPUs 0-2 keep serving
    assert n.metadata.annotations["gpuops.k8s/health.cordoned-by"] == "gpuops.k8s/gpu_health"

    t3 = time.time()
    _health(env, "resolved")  # healthy once, uncordon_after 1: the rules go
    print("health.yml (firing alert) %.1f s; pod on GPU 3 gone %.1f s after it returned; health.yml (resolved) %.1f s"
          % (t1 - t0, t2 - t1, time.time() - t3))
    assert not _res(dyn, "DeviceTaintRule").get(label_selector="gpuops.k8s/health-node=" + node).items
    assert "gpuops.k8s/health.cordoned-by" not in (core.read_node(node).metadata.annotations or {})
    assert _running(core, ns, pods[2])
