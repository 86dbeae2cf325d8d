"""Dynamic MIG through DRA partitionable devices on the real control plane (docs/dra.md), on the session cluster.

A kwok node with two simulated H100s gets the slices NVIDIA's DRA driver publishes with DynamicMIG
(``gpuops.k8s.dra_resource_slices``: a counter slice, then a device slice per GPU, every profile x placement). The
real kube-scheduler allocates ResourceClaims for 1g.10gb, 2g.20gb and 4g.40gb, one pod after the other:

* unsteered, its first fit spreads them: 1g.10gb at memory slice 0 and 2g.20gb at slices 2-3 of GPU 0 leave no
  room for the 4g.40gb placement (slices 0-3), which lands on GPU 1;
* steered by the DeviceTaintRules of ``gpuops.k8s.dra_steering_rules`` (GPU 0 open only at 4g@0, 2g@4, 1g@6), all
  three land on GPU 0.

With the lab's simulated kubelet plugin (tests/e2e/lib/sim_kubelet_plugin.py) the node is backed by an NVML simulator
state file: claims for 4g.40gb, 2g.20gb and 1g.10gb become exactly those GPU instances at the allocated placements,
a released claim takes only its own instance with it, and a placement the simulator refuses is an Event on the claim.

The expected devices were worked out by hand from the slice order (device names sorted, as the driver publishes
them) and the counters. The DeviceClasses get names of their own (the session cluster is shared with other files).
"""
import time

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic as gpu_dra_dynamic
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml_api
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state, mig_changes
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import state as sim_state
from lib import playbook
from lib.sim_kubelet_plugin import SimKubeletPlugin
from lib.wait import wait_for

API = "resource.k8s.io/v1"
NODE = "e2e-dyn-h100"
PROFILES = ("1g.10gb", "2g.20gb", "4g.40gb")


def _facts():
    m = gpu_catalog.CATALOG["h100_80gb"]
    return {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
        {"index": i, "model": "h100_80gb", "name": m.variants[0].nvml_name, "uuid": "GPU-e2e-%d" % i,
         "memory_total_mib": m.total_memory_mib, "mig_mode_current": True, "instances": []} for i in range(2)]}


def _res(dyn, kind):
    return dyn.resources.get(api_version=API, kind=kind)


def _class_name(profile, unique):
    return "e2e-%s-%s" % (gpu_catalog.label_safe(profile).replace(".", "-"), unique)


@pytest.fixture
def dyn_node(k8s_cluster, kwok_nodes, namespace, unique):
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(k8s_cluster.api_client())
    kwok_nodes(NODE, labels={"e2e-dra-dynamic": unique})
    slices = gpu_dra_dynamic.resource_slices(NODE, _facts())
    made = []
    try:
        for s in slices:
            made.append(("ResourceSlice", _res(dyn, "ResourceSlice").create(body=s).metadata.name))
        for c in gpu_dra.device_classes(PROFILES + ("3g.40gb",), extended_resources=True)[2:]:
            profile = c["spec"]["selectors"][0]["cel"]["expression"].rsplit("'", 2)[1]
            c["metadata"]["name"] = _class_name(profile, unique)
            if profile != "3g.40gb":  # only one class serves the extended resource test below
                del c["spec"]["extendedResourceName"]
            made.append(("DeviceClass", _res(dyn, "DeviceClass").create(body=c).metadata.name))
        yield {"dyn": dyn, "slices": slices, "ns": namespace, "unique": unique, "core": k8s_cluster.core,
               "api_client": k8s_cluster.api_client()}
    finally:
        # a failed test leaves claims allocated on this pool: gone before the next test gets the node again
        for pod in k8s_cluster.core.list_namespaced_pod(namespace).items:
            k8s_cluster.core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
        for c in _res(dyn, "ResourceClaim").get(namespace=namespace).to_dict()["items"]:
            _res(dyn, "ResourceClaim").delete(name=c["metadata"]["name"], namespace=namespace)
        wait_for(lambda: not _res(dyn, "ResourceClaim").get(namespace=namespace).to_dict()["items"], 60,
                 what="the test's claims gone")
        for kind, name in reversed(made):
            try:
                _res(dyn, kind).delete(name=name)
            except ApiException:
                pass


def _place_one_after_another(env, tag, profiles=PROFILES):
    """Claim + pod per profile, each pod Running before the next: ``{profile: allocated device}``."""
    dyn, core, ns = env["dyn"], env["core"], env["ns"]
    out = {}
    for profile in profiles:
        name = "%s-%s" % (tag, profile.replace(".", "-"))
        _res(dyn, "ResourceClaim").create(namespace=ns, body={
            "apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "mig", "exactly": {
                "deviceClassName": _class_name(profile, env["unique"]), "allocationMode": "ExactCount",
                "count": 1}}]}}})
        core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"e2e-dra-dynamic": env["unique"]},
                     "resourceClaims": [{"name": "mig", "resourceClaimName": name}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "mig"}]}}]}})
        wait_for(lambda n=name: core.read_namespaced_pod(n, ns).status.phase == "Running", 90,
                 what="%s Running" % name)
        claim = _res(dyn, "ResourceClaim").get(name=name, namespace=ns).to_dict()
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == NODE and result["driver"] == "gpu.nvidia.com"
        out[profile] = result["device"]
    return out


def _release(env, tag, profiles=PROFILES):
    dyn, core, ns = env["dyn"], env["core"], env["ns"]
    for profile in profiles:
        name = "%s-%s" % (tag, profile.replace(".", "-"))
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    for profile in profiles:
        name = "%s-%s" % (tag, profile.replace(".", "-"))
        wait_for(lambda n=name: not [p for p in core.list_namespaced_pod(ns).items if p.metadata.name == n], 60,
                 what="pod %s gone" % name)
        _res(dyn, "ResourceClaim").delete(name=name, namespace=ns)
    names = ["%s-%s" % (tag, p.replace(".", "-")) for p in profiles]
    wait_for(lambda: not [c for c in _res(dyn, "ResourceClaim").get(namespace=ns).to_dict()["items"]
                          if c["metadata"]["name"] in names], 60, what="claims gone")


def test_first_fit_spreads_and_taint_rules_steer_onto_one_gpu(dyn_node):
    env = dyn_node
    # the apiserver kept the counters (DRAPartitionableDevices on): a dropped field would let every device fit
    stored = _res(env["dyn"], "ResourceSlice").get(name=env["slices"][0]["metadata"]["name"]).to_dict()
    assert [cs["name"] for cs in stored["spec"]["sharedCounters"]] == ["gpu-0-counter-set", "gpu-1-counter-set"]
    spread = _place_one_after_another(env, "ff")
    assert spread == {"1g.10gb": "gpu-0-mig-1g10gb-19-0", "2g.20gb": "gpu-0-mig-2g20gb-14-2",
                      "4g.40gb": "gpu-1-mig-4g40gb-5-0"}
    _release(env, "ff")
    rules = gpu_dra_dynamic.steering_rules(env["slices"], {"0": [
        {"profile": "4g.40gb", "start": 0}, {"profile": "2g.20gb", "start": 4}, {"profile": "1g.10gb", "start": 6}]})
    made = []
    try:
        for r in rules:
            r["metadata"]["name"] += "-" + env["unique"]
            made.append(_res(env["dyn"], "DeviceTaintRule").create(body=r).metadata.name)
        time.sleep(2)  # the scheduler sees the rules through its informer
        steered = _place_one_after_another(env, "st")
        assert steered == {"1g.10gb": "gpu-0-mig-1g10gb-19-6", "2g.20gb": "gpu-0-mig-2g20gb-14-4",
                           "4g.40gb": "gpu-0-mig-4g40gb-5-0"}
        _release(env, "st")
    finally:
        for name in made:
            try:
                _res(env["dyn"], "DeviceTaintRule").delete(name=name)
            except ApiException:
                pass


def test_pod_asking_for_the_mig_extended_resource_gets_a_dynamic_device(dyn_node):
    """DRAExtendedResource: the class with extendedResourceName nvidia.com/mig-3g.40gb serves a plain pod spec."""
    env = dyn_node
    dyn, core, ns = env["dyn"], env["core"], env["ns"]
    core.create_namespaced_pod(ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ext-3g"},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"e2e-dra-dynamic": env["unique"]},
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": {"nvidia.com/mig-3g.40gb": "1"}}}]}})
    wait_for(lambda: core.read_namespaced_pod("ext-3g", ns).status.phase == "Running", 90, what="ext-3g Running")
    claims = _res(dyn, "ResourceClaim").get(namespace=ns).to_dict()["items"]
    devices = [r["device"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
    # first fit in slice order: GPU 0's first 3g.40gb placement
    assert devices == ["gpu-0-mig-3g40gb-9-0"]
    core.delete_namespaced_pod("ext-3g", ns, grace_period_seconds=0)


def _simulated_host(tmp_path):
    """The node's NVML simulator: two H100s, MIG mode on, no instances (what dra_resource_slices was given)."""
    path = str(tmp_path / (NODE + ".json"))
    st = sim_state.new_state([{"model": "h100_80gb", "count": 2}], driver_version="580.95.05", seed=34)
    for g in st["gpus"]:
        g["mig_mode_current"] = g["mig_mode_pending"] = 1
    sim_state.save_state(path, st)
    return path


def _instances(path):
    """``{gpu: {(GI profile id, start slice): GI id}}`` as the NVML layer reads the simulator."""
    with nvml_api.open_nvml(simulator=path) as nvml:
        return dict((g["index"], dict(((i["gpu_instance_profile_id"], i["placement"]["start"]), i["gpu_instance_id"])
                                      for i in g["instances"])) for g in gpu_state.read_host(nvml)["gpus"])


BY_HAND = ("4g.40gb", "2g.20gb", "1g.10gb")


def test_sim_kubelet_plugin_makes_the_allocated_instances_and_frees_them(dyn_node, tmp_path):
    """4g.40gb, then 2g.20gb, then 1g.10gb: first fit gives 4g@0 (slices 0-3), 2g@4 (0-1 and 2-3 taken) and 1g@6
    (0-5 taken) on GPU 0. GI profile ids from the catalog's H100 rows: 4g 5, 2g 14, 1g.10gb 19; GI ids from the
    driver's layout over 8 memory slices: the first half 1, the third quarter 5, the seventh eighth 13."""
    env = dyn_node
    path = _simulated_host(tmp_path)
    plugin = SimKubeletPlugin(env["api_client"], {NODE: path})
    placed = _place_one_after_another(env, "kp", BY_HAND)
    assert placed == {"4g.40gb": "gpu-0-mig-4g40gb-5-0", "2g.20gb": "gpu-0-mig-2g20gb-14-4",
                      "1g.10gb": "gpu-0-mig-1g10gb-19-6"}
    done = plugin.sync()
    assert len(done["prepared"]) == 3 and not done["failed"] and not plugin.failures, plugin.failures
    assert _instances(path) == {0: {(5, 0): 1, (14, 4): 5, (19, 6): 13}, 1: {}}
    before = open(path).read()
    assert plugin.sync() == {"prepared": [], "unprepared": [], "failed": []}
    assert open(path).read() == before
    # the 2g.20gb's pod and claim go: only its instance goes
    claim_2g = _res(env["dyn"], "ResourceClaim").get(name="kp-2g-20gb", namespace=env["ns"]).metadata.uid
    _release(env, "kp", ("2g.20gb",))
    assert plugin.sync() == {"prepared": [], "unprepared": [claim_2g], "failed": []}
    assert _instances(path) == {0: {(5, 0): 1, (19, 6): 13}, 1: {}}
    _release(env, "kp", ("4g.40gb", "1g.10gb"))
    assert len(plugin.sync()["unprepared"]) == 2
    assert _instances(path) == {0: {}, 1: {}} and not plugin.prepared


def test_sim_kubelet_plugin_reports_a_placement_the_simulator_refuses(dyn_node, tmp_path):
    """An instance the slices do not know about (1g.10gb at slice 2 of GPU 0, made behind the driver's back) sits
    inside the placement first fit picks for a 4g.40gb (gpu-0-mig-4g40gb-5-0, slices 0-3): the simulator refuses
    it (INSUFFICIENT_RESOURCES), the plugin - running as a thread here - posts PrepareFailed on the claim and makes
    nothing."""
    env = dyn_node
    path = _simulated_host(tmp_path)
    with nvml_api.open_nvml(simulator=path) as nvml:
        alien = mig_changes.create_instance(nvml, 0, "1g.10gb", 2)[0]["gpu_instance_id"]
    plugin = SimKubeletPlugin(env["api_client"], {NODE: path}, interval=0.2)
    plugin.start()
    try:
        placed = _place_one_after_another(env, "kr", ("4g.40gb",))
        assert placed == {"4g.40gb": "gpu-0-mig-4g40gb-5-0"}
        events = wait_for(lambda: env["core"].list_namespaced_event(
            env["ns"], field_selector="involvedObject.name=kr-4g-40gb,involvedObject.kind=ResourceClaim").items, 30,
            what="an Event on the claim")
        assert [e.reason for e in events] == ["PrepareFailed"] and events[0].type == "Warning"
        assert "gpu-0-mig-4g40gb-5-0" in events[0].message and "INSUFFICIENT_RESOURCES" in events[0].message
        assert [f["device"] for f in plugin.failures] == ["gpu-0-mig-4g40gb-5-0"] and not plugin.prepared
        assert _instances(path) == {0: {(19, 2): alien}, 1: {}}
        _release(env, "kr", ("4g.40gb",))
    finally:
        plugin.stop.set()
        plugin.join(5)
    assert _instances(path) == {0: {(19, 2): alien}, 1: {}}  # released: still nothing of it, the alien untouched


ROLE_PLAY = playbook.localhost_yaml("dra-dynamic through the device_plugin role", """\
  tasks:
    - name: DeviceClasses and the simulated node's dynamic slices
      ansible.builtin.include_role: {name: gpuops.k8s.device_plugin}
      vars:
        device_plugin_gpu_allocation: dra-dynamic
        device_plugin_dra_profiles: [1g.10gb]
        device_plugin_dra_resource_slices: [{node: "{{ node }}", gpu_info: "{{ facts }}"}]
""")


def test_device_plugin_role_in_dra_dynamic_mode(k8s_cluster, kwok_nodes, tmp_path, unique):
    """The role asks the API server (server-side dry run) whether it keeps the counters, then applies the classes
    (extendedResourceName on the profile class) and the node's counter and device slices."""
    from kubernetes import dynamic
    dyn = dynamic.DynamicClient(k8s_cluster.api_client())
    node = kwok_nodes("e2e-dyn-role-" + unique)
    variables = {"node": node, "facts": _facts()}
    try:
        run = playbook.run(playbook.write(tmp_path, ROLE_PLAY), kubeconfig=k8s_cluster.kubeconfig, cwd=tmp_path,
                           extra_vars=variables, timeout=300, expect_rc=None)
        assert run.ok, run.explain()
        slices = [s for s in _res(dyn, "ResourceSlice").get().to_dict()["items"] if s["spec"].get("nodeName") == node]
        assert sorted(s["metadata"]["name"] for s in slices) == [
            "%s-gpu-nvidia-com-%s" % (node, x) for x in ("counters-000", "devices-000", "devices-001")]
        assert [d["name"] for s in slices for d in s["spec"].get("devices") or []][:2] == [
            "gpu-0", "gpu-0-mig-1g10gb-19-0"]
        # the probe was a dry run: nothing of it stored
        assert not [s for s in _res(dyn, "ResourceSlice").get().to_dict()["items"]
                    if s["spec"].get("nodeName") == "gpuops-dra-gate-probe"]
        cls = _res(dyn, "DeviceClass").get(name="mig-1g.10gb.nvidia.com").to_dict()
        assert cls["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.10gb"
    finally:  # the session cluster is shared: remove what the role made (a second role run would cost a minute)
        for s in _res(dyn, "ResourceSlice").get().to_dict()["items"]:
            if s["spec"].get("nodeName") == node:
                _res(dyn, "ResourceSlice").delete(name=s["metadata"]["name"])
        for name in ("gpu.nvidia.com", "mig.nvidia.com", "mig-1g.10gb.nvidia.com"):
            try:
                _res(dyn, "DeviceClass").delete(name=name)
            except ApiException:
                pass
