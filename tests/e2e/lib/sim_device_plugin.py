# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin and GPU Feature Discovery of the simulated lab.

On a real GPU node the NVIDIA device plugin and GFD read the GPUs through NVML and publish what they
find: ``nvidia.com/*`` capacity (full GPUs, MIG slices, shared replicas) and the ``nvidia.com/gpu.*``
labels; after a MIG change they publish the new layout. This process does the same for simulated
hosts: every ``interval`` seconds it reads each host's NVML simulator state file through the
collection's own NVML layer and updates the host's kwok node (labels through the Node,
capacity through ``nodes/status``) when something changed. What it advertises follows the node's
config of the deployed device plugin (gpuops.k8s.device_plugin: the ConfigMap of named configs, the
node's ``nvidia.com/device-plugin.config`` label, else the DaemonSet's ``DEFAULT_CONFIG``), as the
real plugin's config-manager does: its MIG strategy and time-slicing/MPS replicas. Until a device
plugin is deployed, the inventory's ``gpuops_sim_mig_strategy`` / ``gpuops_sim_sharing`` stand in. So a playbook that changes a simulated
host's MIG layout (``gpu_nodes.yml``, ``mig_reconfigure.yml``) sees its node advertise the new
resources, asynchronously, as on a real cluster.

Hosts whose state file does not exist yet are left as they are (``make cluster-up`` publishes them
from the inventory's ``gpuops_sim_gpus``). A state file caught halfway through a change is read again
on the next round.

    python tests/e2e/lib/sim_device_plugin.py --kubeconfig .cache/cluster/kubeconfig \\
        --fleet inventories/sim/hosts.yml --sim-dir .cache/sim

``make cluster-up`` starts it for the simulated lab and ``make cluster-down`` stops it
(log: ``.cache/cluster/logs/sim-device-plugin.log``).
"""
import argparse
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_nodes  # noqa: E402  (puts the collection on sys.path)


def hosts_from_fleet(fleet, sim_dir):
    """{node: {simulator, mig_strategy, sharing}} for the hosts of ``gpu_nodes.fleet_from_inventory``."""
    return dict((name, {"simulator": os.path.join(sim_dir, name + ".json"),
                        "mig_strategy": spec.get("mig_strategy") or "none",
                        "sharing": spec.get("sharing")})
                for name, spec in fleet.items())


def config_effect(name, config):
    """What a device plugin config (the upstream ``version: v1`` file) makes the plugin advertise:
    ``{"mig_strategy", "sharing"}`` for ``gpu_node_labels.node_gpu_state`` (the collection's
    ``stack.device_plugin_config_effect``, which mig_reconfigure.yml's wait uses too)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
    return device_plugin.device_plugin_config_effect(name, config)


class PluginConfigs(object):
    """The deployed device plugin's named configs (its ConfigMap) and default (the DaemonSet's
    ``DEFAULT_CONFIG``), read as the config-manager sidecar does; None while it is not deployed."""

    def __init__(self, api_client, namespace="nvidia-device-plugin", name="nvidia-device-plugin"):
        self.api_client, self.namespace, self.name = api_client, namespace, name

    def read(self):
        import yaml
        from kubernetes import client
        from kubernetes.client.rest import ApiException
        try:
            cm = client.CoreV1Api(self.api_client).read_namespaced_config_map(self.name + "-configs", self.namespace)
            ds = client.AppsV1Api(self.api_client).read_namespaced_daemon_set(self.name, self.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        default = None
        for container in (ds.spec.template.spec.init_containers or []) + (ds.spec.template.spec.containers or []):
            for env in container.env or []:
                if env.name == "DEFAULT_CONFIG":
                    default = env.value
        return {"default": default, "configs": dict((k, yaml.safe_load(v)) for k, v in (cm.data or {}).items())}


def read_facts(simulator):
    """The host's live GPU facts (what the plugin would see through NVML)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
    with nvml.open_nvml(simulator=simulator) as backend:
        return gpu_state.read_host(backend)


class SimDevicePlugin(threading.Thread):
    """Publishes each simulated host's live GPUs on its kwok node; ``stop`` ends it.

    ``hosts``: {node name: {"simulator": state file, "mig_strategy": none|single|mixed,
    "sharing": None or {strategy, replicas}}}. ``updates`` counts the node updates made,
    ``errors`` holds the last error per node (cleared when the node publishes again).
    """

    def __init__(self, api, hosts, interval=0.5, log=None, configs=None):
        super(SimDevicePlugin, self).__init__(daemon=True)
        self.api, self.hosts, self.interval, self.configs = api, hosts, interval, configs
        self.stop = threading.Event()
        self.updates = 0
        self.errors = {}
        self._log = log or (lambda msg: None)
        self._seen = {}

    def _effect(self, name, spec, deployed):
        """(mig_strategy, sharing) for node ``name``: its config of the deployed device plugin (node label
        nvidia.com/device-plugin.config, else the default), else the inventory's values."""
        if deployed:
            from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
            config = device_plugin.node_device_plugin_config(self.api.read_node(name).metadata.labels or {}, deployed)
            if config is not None:
                effect = device_plugin.device_plugin_config_effect(config, deployed["configs"][config])
                return effect["mig_strategy"], effect["sharing"]
        return spec.get("mig_strategy") or "none", spec.get("sharing")

    def sync_once(self):
        """One round over every host; returns the nodes changed in this round."""
        changed = []
        try:
            deployed = self.configs.read() if self.configs else None
        except Exception as e:  # the API busy: next round
            self.errors["device-plugin-config"] = str(e)
            return changed
        for name, spec in self.hosts.items():
            path = spec["simulator"]
            try:
                stamp = os.stat(path)
                mig_strategy, sharing = self._effect(name, spec, deployed)
            except Exception as e:  # no state file yet, or the node or API not there
                self.errors[name] = str(e)
                continue
            key = (stamp.st_mtime_ns, stamp.st_size, mig_strategy, repr(sharing))
            if self._seen.get(name) == key and name not in self.errors:
                continue
            try:
                facts = read_facts(path)
                changes = gpu_nodes.ensure_node(
                    self.api, name, gpu_facts=facts["gpus"], mig_strategy=mig_strategy,
                    sharing=sharing, driver_version=facts.get("driver_version"))
            except Exception as e:  # a layout halfway through a change, or the API busy: next round
                self.errors[name] = str(e)
                continue
            self.errors.pop(name, None)
            self._seen[name] = key
            if changes:
                self.updates += 1
                changed.append(name)
                self._log("%s: %s" % (name, ", ".join("%s=%s" % (k, v) for k, v in sorted(
                    changes.get("capacity", {}).items())) or "labels updated"))
        return changed

    def run(self):
        while not self.stop.is_set():
            self.sync_once()
            self.stop.wait(self.interval)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--fleet", required=True, help="inventory YAML whose hosts carry gpuops_sim_gpus")
    ap.add_argument("--sim-dir", required=True, help="directory of the hosts' <name>.json simulator states")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--plugin-namespace", default="nvidia-device-plugin",
                    help="namespace of the device plugin deployed by gpuops.k8s.device_plugin")
    ap.add_argument("--plugin-name", default="nvidia-device-plugin", help="its device_plugin_name")
    args = ap.parse_args(argv)

    def log(msg):
        print("%s %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), msg), flush=True)

    hosts = hosts_from_fleet(gpu_nodes.fleet_from_inventory(args.fleet), os.path.abspath(args.sim_dir))
    from kubernetes import config as kube_config
    configs = PluginConfigs(kube_config.new_client_from_config(args.kubeconfig), args.plugin_namespace,
                            args.plugin_name)
    plugin = SimDevicePlugin(gpu_nodes.core_api(args.kubeconfig), hosts, interval=args.interval, log=log,
                             configs=configs)
    signal.signal(signal.SIGTERM, lambda *_: plugin.stop.set())
    log("publishing %s from %s every %.1fs" % (", ".join(sorted(hosts)), args.sim_dir, args.interval))
    plugin.start()
    while plugin.is_alive():
        plugin.join(1)
    log("stopped after %d node update(s)" % plugin.updates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
