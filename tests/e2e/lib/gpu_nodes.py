# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kwok GPU nodes for the local cluster, labelled as GPU Feature Discovery would and advertising
``nvidia.com/*`` capacity as the device plugin would (the facts come from
``plugins/module_utils/k8s/labels.py``; the Kubernetes calls go through the official Python
client, the same library kubernetes.core uses).

    from lib import gpu_nodes
    api = gpu_nodes.core_api(kubeconfig)
    gpu_nodes.ensure_node(api, "dgx-a100-01", gpus=[{"model": "a100_80gb", "count": 8}],
                          mig_strategy="mixed", mig_config={"1g.10gb": 7})
    # after a MIG change, act as the device plugin: same call with the new layout
"""

import os
import sys

import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_COLLECTIONS = os.path.join(TOP, ".build", "collections")
_link = os.path.join(_COLLECTIONS, "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(TOP, _link)
if _COLLECTIONS not in sys.path:
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import labels as gpu_labels  # noqa: E402

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
DEFAULT_NODE_RESOURCES = {"cpu": "128", "memory": "1Ti", "pods": "110", "ephemeral-storage": "2Ti"}


def core_api(kubeconfig):
    from kubernetes import client, config
    return client.CoreV1Api(config.new_client_from_config(kubeconfig))


def fleet_from_inventory(path):
    """Hosts of an inventory YAML file that carry ``gpuops_sim_gpus`` -> {name: node spec}.

    Optional host vars: ``gpuops_sim_mig_strategy`` (none|single|mixed), ``gpuops_sim_mig_config``
    (mig-parted entries or {profile: count}), ``gpuops_sim_sharing`` ({strategy, replicas}).
    """
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    fleet = {}

    def walk(group, inherited):
        gvars = dict(inherited)
        gvars.update(group.get("vars") or {})
        for name, hvars in (group.get("hosts") or {}).items():
            merged = dict(gvars)
            merged.update(hvars or {})
            if merged.get("gpuops_sim_gpus"):
                fleet[name] = {
                    "gpus": merged["gpuops_sim_gpus"],
                    "mig_strategy": merged.get("gpuops_sim_mig_strategy", "none"),
                    "mig_config": merged.get("gpuops_sim_mig_config"),
                    "sharing": merged.get("gpuops_sim_sharing"),
                    "driver_version": merged.get("gpuops_sim_driver_version"),
                }
        for child in (group.get("children") or {}).values():
            walk(child or {}, gvars)

    for group in data.values():
        walk(group or {}, {})
    return fleet


def node_manifest(name, state, labels=None, resources=None):
    """A kwok-managed Node (created with its status: nodes keep status on create)."""
    res = dict(DEFAULT_NODE_RESOURCES)
    res.update(resources or {})
    res.update(state["capacity"] if state else {})
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "type": "kwok"}
    all_labels.update(labels or {})
    all_labels.update(state["labels"] if state else {})
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": {KWOK_ANNOTATION: "fake"}},
        "spec": {},
        "status": {"capacity": dict(res), "allocatable": dict(res)},
    }


def ensure_node(api, name, gpus=None, mig_strategy="none", mig_config=None, sharing=None, gpu_facts=None,
                driver_version=None, labels=None, resources=None):
    """Create or update one kwok GPU node; returns the changes made ({} when nothing changed).

    Labels go through the Node object, capacity/allocatable through the ``nodes/status``
    subresource (an update of the Node itself keeps the old status, as for any kubelet).
    """
    from kubernetes.client.rest import ApiException

    state = None
    if gpus or gpu_facts:
        state = gpu_labels.node_gpu_state(gpus=gpus, mig_strategy=mig_strategy, mig_config=mig_config,
                                          sharing=sharing, gpu_facts=gpu_facts,
                                          driver_version=driver_version)
    try:
        node = api.read_node(name)
    except ApiException as e:
        if e.status != 404:
            raise
        api.create_node(node_manifest(name, state, labels, resources))
        wait_initialised(api, name)
        return {"created": name}
    if not _ready(node):
        node = wait_initialised(api, name)
    desired = state or {"labels": {}, "capacity": {}}
    if labels:
        desired = {"labels": dict(desired["labels"], **labels), "capacity": desired["capacity"]}
    changes = gpu_labels.node_changes(node.metadata.labels, node.status.capacity, desired)
    if changes["labels"]:
        api.patch_node(name, {"metadata": {"labels": changes["labels"]}})
    if changes["capacity"]:
        api.patch_node_status(name, {"status": {"capacity": changes["capacity"],
                                                "allocatable": changes["capacity"]}})
    return dict((k, v) for k, v in changes.items() if v)


def _ready(node):
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def wait_initialised(api, name, timeout=60):
    """Wait until kwok's node-initialize stage has run on ``name``; returns the node.

    That stage writes the whole status back from the copy kwok saw (capacity and allocatable
    included): a status patch made before it runs is undone. It runs once, while the node is
    not Ready; the heartbeat stage after it touches only the conditions.
    """
    import time
    deadline = time.time() + timeout
    while True:
        node = api.read_node(name)
        if _ready(node):
            return node
        if time.time() > deadline:
            raise AssertionError("timed out after %ss waiting for kwok to initialise node %s (Ready=True)"
                                 % (timeout, name))
        time.sleep(0.1)


def plain_node(api, name, labels=None, resources=None):
    """A kwok node without GPUs (for 'lands only on GPU nodes' checks)."""
    return ensure_node(api, name, labels=labels, resources=resources)


def delete_node(api, name):
    from kubernetes.client.rest import ApiException
    try:
        api.delete_node(name)
    except ApiException as e:
        if e.status != 404:
            raise


def delete_pod_and_wait(core, name, namespace, timeout):
    """Delete a pod at once (grace 0) and wait until the API server no longer has it: (asked at, gone at)."""
    import time
    from kubernetes.client.rest import ApiException
    from lib.wait import wait_for
    asked = time.time()
    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def gone():
        try:
            core.read_namespaced_pod(name, namespace)
            return False
        except ApiException as e:
            return e.status == 404
    wait_for(gone, timeout=timeout, interval=0.2, what="%s deleted" % name)
    return asked, time.time()


def remove_test_objects(core, sched, namespaces, priority_class, nodes):
    """A test's namespaces, PriorityClass and kwok nodes removed (what is already gone is fine)."""
    from kubernetes.client.rest import ApiException
    for name in namespaces:
        try:
            core.delete_namespace(name)
        except ApiException:
            pass
    try:
        sched.delete_priority_class(priority_class)
    except ApiException:
        pass
    for n in nodes:
        delete_node(core, n)


GPU_PRIORITY_CLASSES = ("gpu-critical", "gpu-high", "gpu-low")


def delete_priority_classes(sched, keep=(), names=GPU_PRIORITY_CLASSES):
    """Delete the PriorityClasses ``names`` (gpu_tenancy's defaults) but those in ``keep`` (there before the test)."""
    from kubernetes.client.rest import ApiException
    for pc in names:
        if pc not in keep:
            try:
                sched.delete_priority_class(pc)
            except ApiException:
                pass


def apply_fleet(kubeconfig, fleet):
    """ensure_node for every host of ``fleet`` (from fleet_from_inventory); returns the node names."""
    api = core_api(kubeconfig)
    for name, spec in fleet.items():
        ensure_node(api, name, **spec)
    return list(fleet)


def sim_hosts_at_all_1g(work, group, inventory, kubeconfig):
    """Simulated hosts of ``group`` (host vars gpuops_simulator, gpuops_sim_gpus) created afresh, MIG on, at
    all-1g.10gb of ``work``/files/mig-config.yaml (ansible-playbook of the collection's modules)."""
    from lib import playbook  # noqa  (tests/e2e on sys.path)
    setup = work / "setup.yml"
    setup.write_text(yaml.safe_dump([{
        "name": "Simulated hosts at all-1g.10gb", "hosts": group, "gather_facts": False,
        "module_defaults": {"group/gpuops.k8s.nvml": {"simulator": "{{ gpuops_simulator }}"}},
        "tasks": [
            {"name": "Host", "gpuops.k8s.nvml_simulator": {
                "path": "{{ gpuops_simulator }}", "gpus": "{{ gpuops_sim_gpus }}", "reset": True}},
            {"name": "MIG on", "gpuops.k8s.mig_mode": {"state": "enabled", "reset": True}},
            {"name": "Layout", "gpuops.k8s.mig_partition": {
                "config_file": str(work / "files" / "mig-config.yaml"), "config": "all-1g.10gb"}},
        ]}]))
    playbook.run(str(setup), inventory=str(inventory), kubeconfig=kubeconfig, timeout=300)


KWOK_TOLERATION = {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}


def gpu_deployment(name, replicas, resource, node_selector):
    """A Deployment of ``replicas`` pods, each asking for one ``resource`` (e.g. nvidia.com/mig-3g.40gb) on the kwok
    nodes that ``node_selector`` picks; kwok runs no containers."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "nodeSelector": node_selector, "tolerations": [KWOK_TOLERATION],
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                         "resources": {"limits": {resource: "1"}, "requests": {resource: "1"}}}]}}}}
