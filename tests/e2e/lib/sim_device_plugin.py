# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The device plugin and GPU Feature Discovery of the simulated lab.

On a real GPU node the NVIDIA device plugin and GFD read the GPUs through NVML and publish what they
find: ``nvidia.com/*`` capacity (full GPUs, MIG slices, shared replicas) and the ``nvidia.com/gpu.*``
labels; after a MIG change they publish the new layout. This process does the same for simulated
hosts: every ``interval`` seconds it reads each host's NVML simulator state file through the
collection's own NVML layer and updates the host's kwok node (labels through the Node,
capacity through ``nodes/status``) when something changed. So a playbook that changes a simulated
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


def read_facts(simulator):
    """The host's live GPU facts (what the plugin would see through NVML)."""
    from ansible_collections.gpuops.k8s.plugins.module_utils import gpu_state, nvml
    with nvml.open_nvml(simulator=simulator) as backend:
        return gpu_state.read_host(backend)


class SimDevicePlugin(threading.Thread):
    """Publishes each simulated host's live GPUs on its kwok node; ``stop`` ends it.

    ``hosts``: {node name: {"simulator": state file, "mig_strategy": none|single|mixed,
    "sharing": None or {strategy, replicas}}}. ``updates`` counts the node updates made,
    ``errors`` holds the last error per node (cleared when the node publishes again).
    """

    def __init__(self, api, hosts, interval=0.5, log=None):
        super(SimDevicePlugin, self).__init__(daemon=True)
        self.api, self.hosts, self.interval = api, hosts, interval
        self.stop = threading.Event()
        self.updates = 0
        self.errors = {}
        self._log = log or (lambda msg: None)
        self._seen = {}

    def sync_once(self):
        """One round over every host; returns the nodes changed in this round."""
        changed = []
        for name, spec in self.hosts.items():
            path = spec["simulator"]
            try:
                stamp = os.stat(path)
            except OSError:
                continue
            key = (stamp.st_mtime_ns, stamp.st_size)
            if self._seen.get(name) == key and name not in self.errors:
                continue
            try:
                facts = read_facts(path)
                changes = gpu_nodes.ensure_node(
                    self.api, name, gpu_facts=facts["gpus"], mig_strategy=spec.get("mig_strategy") or "none",
                    sharing=spec.get("sharing"), driver_version=facts.get("driver_version"))
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
    args = ap.parse_args(argv)

    def log(msg):
        print("%s %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), msg), flush=True)

    hosts = hosts_from_fleet(gpu_nodes.fleet_from_inventory(args.fleet), os.path.abspath(args.sim_dir))
    plugin = SimDevicePlugin(gpu_nodes.core_api(args.kubeconfig), hosts, interval=args.interval, log=log)
    signal.signal(signal.SIGTERM, lambda *_: plugin.stop.set())
    log("publishing %s from %s every %.1fs" % (", ".join(sorted(hosts)), args.sim_dir, args.interval))
    plugin.start()
    while plugin.is_alive():
        plugin.join(1)
    log("stopped after %d node update(s)" % plugin.updates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
