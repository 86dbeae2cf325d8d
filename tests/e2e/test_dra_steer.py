"""Re-plan without a drain on a dra-dynamic node (docs/dra.md): playbooks/replan.yml on the session cluster.

A kwok node with two simulated H100s publishes the slices NVIDIA's DRA driver publishes with DynamicMIG
(``gpuops.k8s.dra_resource_slices``); the lab's simulated kubelet plugin (tests/e2e/lib/sim_kubelet_plugin.py) makes
the allocated MIG instances in the node's NVML simulator. An earlier plan's DeviceTaintRules keep GPU 0 open only at
4g.40gb@0, 2g.20gb@4 and 1g.10gb@6 and GPU 1 closed; claims for those three run. A pod asking for 3g.40gb pends.

replan.yml (replan_apply) sees the node is dra-dynamic (its host's device_plugin_gpu_allocation), keeps the three
placements in use open and opens 3g.40gb on GPU 1 at memory slices 4-7 - worked out by hand from the H100 table:
GPU 0 has 132 - 64 - 32 - 16 = 20 SMs left (3g needs 60); on GPU 1, 3g@0 would leave 10 devices allocatable
(3g@4, 2g@4, 1g.20gb@4/6, 1g.10gb@4-6, +me@4-6), 3g@4 leaves 14 (4g@0, 3g@0, 2g@0/2, 1g.20gb@0/2, 1g.10gb@0-3,
+me@0-3). So one rule goes (gpu-1-mig-3g40gb-9-4), the pod is scheduled there (unsteered first fit would take 9-0),
no pod is evicted or rebound, no claim's allocation changes, the simulator still holds the three instances in use
with their GPU instance ids and now a 3g.40gb at slice 4 of GPU 1; a second run changes nothing.
"""
import json
import sys
import time

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml_api
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import state as sim_state
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic
from lib import gpu_nodes, playbook
from lib.sim_kubelet_plugin import SimKubeletPlugin
from lib.wait import wait_for

API = "resource.k8s.io/v1"
NODE = "e2e-steer-h100"
TOP = gpu_nodes.TOP
RUNNING = ("4g.40gb", "2g.20gb", "1g.10gb")
REMOVE_TASK = "Remove the rules of an earlier plan that these nodes no longer want"
APPLY_TASK = "Apply the steering rules (server-side apply; taints only, no drain)"


def _res(dyn, kind):
    return dyn.resources.get(api_version=API, kind=kind)


def _facts():
    m = gpu_catalog.CATALOG["h100_80gb"]
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
        {"index": i, "model": "h100_80gb", "name": m.variants[0].nvml_name, "uuid": "GPU-steer-%d" % i,
         "memory_total_mib": m.total_memory_mib, "mig_mode_current": True, "instances": []} for i in range(2)]}


def _instances(path):
    """``{gpu: {(GI profile id, start slice): GI id}}`` as the NVML layer reads the simulator."""
    with nvml_api.open_nvml(simulator=path) as nvml:
        return dict((g["index"], dict(((i["gpu_instance_profile_id"], i["placement"]["start"]), i["gpu_instance_id"])
                                      for i in g["instances"])) for g in gpu_state.read_host(nvml)["gpus"])


@pytest.fixture
def steer_node(k8s_cluster, kwok_nodes, namespace, unique, tmp_path):
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(k8s_cluster.api_client())
    kwok_nodes(NODE, labels={"e2e-dra-steer": unique})
    slices = gpu_dra_dynamic.resource_slices(NODE, _facts())
    sim = str(tmp_path / (NODE + ".json"))
    st = sim_state.new_state([{"model": "h100_80gb", "count": 2}], driver_version="580.95.05", seed=34)
    for g in st["gpus"]:
        g["mig_mode_current"] = g["mig_mode_pending"] = 1
    sim_state.save_state(sim, st)
    classes = {}
    made = []
    try:
        for s in slices:
            made.append(("ResourceSlice", _res(dyn, "ResourceSlice").create(body=s).metadata.name))
        for c in gpu_dra.device_classes(RUNNING + ("3g.40gb",))[2:]:
            profile = c["spec"]["selectors"][0]["cel"]["expression"].rsplit("'", 2)[1]
            c["metadata"]["name"] = classes[profile] = "e2e-steer-%s-%s" % (profile.replace(".", "-"), unique)
            made.append(("DeviceClass", _res(dyn, "DeviceClass").create(body=c).metadata.name))
        yield {"dyn": dyn, "slices": slices, "ns": namespace, "unique": unique, "core": k8s_cluster.core,
               "classes": classes, "sim": sim, "api_client": k8s_cluster.api_client(),
               "kubeconfig": k8s_cluster.kubeconfig}
    finally:
        for r in _res(dyn, "DeviceTaintRule").get(label_selector="gpuops.k8s/steering=closed").to_dict()["items"]:
            if r["spec"]["deviceSelector"]["pool"] == NODE:
                _res(dyn, "DeviceTaintRule").delete(name=r["metadata"]["name"])
        for kind, name in reversed(made):
            try:
                _res(dyn, kind).delete(name=name)
            except ApiException:
                pass


def _claim_and_pod(env, name, profile):
    _res(env["dyn"], "ResourceClaim").create(namespace=env["ns"], body={
        "apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
            "deviceClassName": env["classes"][profile], "allocationMode": "ExactCount", "count": 1}}]}}})
    env["core"].create_namespaced_pod(env["ns"], {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"e2e-dra-steer": env["unique"]},
                 "resourceClaims": [{"name": "mig", "resourceClaimName": name}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"claims": [{"name": "mig"}]}}]}})


def _allocations(env):
    claims = _res(env["dyn"], "ResourceClaim").get(namespace=env["ns"]).to_dict()["items"]
    return dict((c["metadata"]["name"], [r["device"] for r in c["status"]["allocation"]["devices"]["results"]])
                for c in claims if (c.get("status") or {}).get("allocation"))


def _rules(env):
    return sorted(r["spec"]["deviceSelector"]["device"] for r in _res(env["dyn"], "DeviceTaintRule").get(
        label_selector="gpuops.k8s/steering=closed").to_dict()["items"] if r["spec"]["deviceSelector"]["pool"] == NODE)


def test_replan_opens_a_3g_placement_for_a_pending_pod_without_evicting_anyone(steer_node, tmp_path):
    env = steer_node
    dyn, core, ns = env["dyn"], env["core"], env["ns"]
    earlier = gpu_dra_dynamic.steering_rules(env["slices"], {
        "0": [{"profile": "4g.40gb", "start": 0}, {"profile": "2g.20gb", "start": 4}, {"profile": "1g.10gb", "start": 6}],
        "1": []})
    for r in earlier:
        _res(dyn, "DeviceTaintRule").create(body=r)
    time.sleep(2)  # the scheduler sees the rules through its informer
    plugin = SimKubeletPlugin(env["api_client"], {NODE: env["sim"]})
    for profile in RUNNING:
        _claim_and_pod(env, "run-" + profile.replace(".", "-"), profile)
        wait_for(lambda n="run-" + profile.replace(".", "-"): core.read_namespaced_pod(n, ns).status.phase == "Running",
                 60, what="%s Running" % profile)
    before = _allocations(env)
    assert before == {"run-4g-40gb": ["gpu-0-mig-4g40gb-5-0"], "run-2g-20gb": ["gpu-0-mig-2g20gb-14-4"],
                      "run-1g-10gb": ["gpu-0-mig-1g10gb-19-6"]}
    done = plugin.sync()
    assert len(done["prepared"]) == 3 and not done["failed"], plugin.failures
    in_use = _instances(env["sim"])
    # GI profile ids of the catalog's H100 rows: 4g 5, 2g 14, 1g.10gb 19
    assert sorted(in_use[0]) == [(5, 0), (14, 4), (19, 6)] and in_use[1] == {}
    uids = dict((p.metadata.name, p.metadata.uid) for p in core.list_namespaced_pod(ns).items)

    _claim_and_pod(env, "want-3g", "3g.40gb")

    def unschedulable():
        conds = core.read_namespaced_pod("want-3g", ns).status.conditions or []
        return [c for c in conds if c.type == "PodScheduled" and c.reason == "Unschedulable"]
    wait_for(unschedulable, 60, what="want-3g Unschedulable")

    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"gpu_nodes": {"hosts": {NODE: {
        "ansible_connection": "local", "device_plugin_gpu_allocation": "dra-dynamic", "gpu_count": 2,
        "gpu_product": gpu_catalog.product_label(gpu_catalog.CATALOG["h100_80gb"].variants[0].nvml_name)}}}}}}))
    variables = {"replan_apply": True, "replan_namespaces": [ns], "replan_output_dir": str(tmp_path / "out"),
                 "ansible_python_interpreter": sys.executable}

    def replan(check=False):
        return playbook.run(TOP + "/playbooks/replan.yml", inventory=inventory, kubeconfig=env["kubeconfig"],
                            extra_vars=variables, check=check, diff=check, timeout=300, cwd=tmp_path)
    dry = replan(check=True)
    assert REMOVE_TASK in dry.changed(), dry.changed()
    assert _rules(env) == sorted(r["spec"]["deviceSelector"]["device"] for r in earlier)  # check mode: untouched
    run = replan()
    names = [n for n, r in run.results() if not r.get("skipped")]  # the tasks that ran
    assert not [n for n in names if "rolling reconfiguration" in n or "Re-plan with the current layouts" in n], names
    assert REMOVE_TASK in run.changed() and set(run.changed()) <= {REMOVE_TASK, APPLY_TASK}, run.changed()
    rules = _rules(env)
    assert "gpu-1-mig-3g40gb-9-4" not in rules and len(rules) == len(earlier) - 1
    wait_for(lambda: core.read_namespaced_pod("want-3g", ns).status.phase == "Running", 60, what="want-3g Running")
    after = _allocations(env)
    assert after.pop("want-3g") == ["gpu-1-mig-3g40gb-9-4"]
    assert after == before  # the claims in use kept their devices
    pods = dict((p.metadata.name, p) for p in core.list_namespaced_pod(ns).items)
    for name, uid in uids.items():
        assert pods[name].metadata.uid == uid and pods[name].status.phase == "Running", name
        assert pods[name].metadata.deletion_timestamp is None, name
    done = plugin.sync()
    assert len(done["prepared"]) == 1 and not done["unprepared"] and not done["failed"], (done, plugin.failures)
    now = _instances(env["sim"])
    assert now[0] == in_use[0]  # the same instances (GI ids) survive: nothing destroyed or remade
    assert sorted(now[1]) == [(9, 4)]  # 3g.40gb (GI profile 9) at memory slice 4
    again = replan()
    assert again.changed() == [], again.changed()
    assert _rules(env) == rules
    print("replan.yml: check %.1f s, apply %.1f s, again %.1f s" % (dry.seconds, run.seconds, again.seconds))
