# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet plugin of NVIDIA's DRA driver with ``DynamicMIG``, simulated for kwok nodes (docs/dra.md).

On a real node the driver's kubelet plugin gets ``NodePrepareResources`` from the kubelet for every claim of a pod
bound to the node, creates the GPU instance (and its compute instance) of each allocated MIG device at the
device's placement, and destroys it again at ``NodeUnprepareResources``. kwok nodes have no kubelet, so this
process plays both ends against the hosts' NVML simulator state files:

* every round it lists the ResourceClaims (``resource.k8s.io/v1``) whose ``status.allocation.devices.results``
  name driver ``gpu.nvidia.com`` and a pool that is one of its nodes (pool name = node name);
* each allocated device name is mapped back to (GPU minor, profile, placement start) with
  ``dra_dynamic.parse_device_name`` and the instance is made with ``nvml.mig_changes.create_instance`` (the writer
  ``mig_partition``'s engine uses) through the collection's NVML layer, under the host lock, so the simulator's MIG
  rules decide; one full compute instance per GPU instance, as the driver makes;
* it records per claim uid what it made (GPU, GPU instance id, compute instance ids); when the claim is gone or no
  longer allocated there, it destroys exactly those instances and nothing else;
* a placement the simulator refuses is a failure: nothing of the claim stays made (what was made for its other
  devices is destroyed again), a Warning Event with reason ``PrepareFailed`` goes on the claim and the failure is
  appended to ``failures``; it is tried again every round (an Event only when the message changes), as the kubelet
  retries. A destroy that fails (``NVML_ERROR_IN_USE``) keeps the record, gets an ``UnprepareFailed`` Event and is
  tried again.

A whole-GPU device (``gpu-<minor>``) needs no instance: it is recorded with none. The simulator's GPU minor is its
index. kwok still marks a pod whose claim failed Running (a real kubelet would keep it in ContainerCreating): the
Event and ``failures`` are what tests read.

    python tests/e2e/lib/sim_kubelet_plugin.py --kubeconfig .cache/cluster/kubeconfig \\
        --node e2e-dyn-h100=.cache/sim/e2e-dyn-h100.json [--checkpoint .cache/sim/dra-checkpoint.json]

In tests: ``plugin = SimKubeletPlugin(api_client, {node: state_file})``; ``plugin.sync()`` runs one round and
returns what it did (deterministic), ``plugin.start()`` / ``plugin.stop.set()`` run it as a thread.
"""
import argparse
import contextlib
import datetime
import json
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))  # gpu_nodes below puts the collection on sys.path
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_nodes  # noqa: E402,F401 pylint: disable=unused-import

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml_api  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state, mig_changes  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra_dynamic  # noqa: E402

DRIVER = "gpu.nvidia.com"
API_GROUP, API_VERSION = "resource.k8s.io", "v1"


def claim_devices(claim, driver, nodes):
    """``[(node, device)]`` of a claim dict's allocation on the driver's pools among ``nodes``."""
    alloc = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    return [(r["pool"], r["device"]) for r in alloc.get("results") or []
            if r.get("driver") == driver and r.get("pool") in nodes]


class SimKubeletPlugin(threading.Thread):
    """Prepares and unprepares the claims allocated on simulated nodes; ``stop`` ends the thread.

    ``hosts``: ``{node name: NVML simulator state file}``. ``prepared``: ``{claim uid: {namespace, name,
    devices: [{node, device, gpu, profile, profile_id, start, gpu_instance_id, compute_instance_ids}]}}``;
    ``failures``: every new failure ``{uid, namespace, name, node, device, reason, message}``; ``events``: the
    Events posted.
    """

    def __init__(self, api_client, hosts, interval=0.5, log=None, driver=DRIVER, checkpoint=None):
        super(SimKubeletPlugin, self).__init__(daemon=True)
        from kubernetes import client
        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.hosts, self.interval, self.driver, self.checkpoint = dict(hosts), interval, driver, checkpoint
        self.stop = threading.Event()
        self.prepared = {}
        self.failures = []
        self.events = []
        self.errors = []
        self._last_failure = {}
        self._lock = threading.Lock()
        self._log = log or (lambda msg: None)
        if checkpoint and os.path.exists(checkpoint):
            with open(checkpoint) as f:
                self.prepared = json.load(f)["prepared"]

    # -- the Kubernetes side ------------------------------------------------------------------------------------

    def _claims(self):
        items = self.custom.list_cluster_custom_object(API_GROUP, API_VERSION, "resourceclaims")["items"]
        out = {}
        for c in items:
            devices = claim_devices(c, self.driver, self.hosts)
            if devices:
                md = c["metadata"]
                out[md["uid"]] = {"namespace": md["namespace"], "name": md["name"], "devices": devices}
        return out

    def _event(self, claim, uid, node, reason, message):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": claim["name"] + ".", "namespace": claim["namespace"]},
                "involvedObject": {"apiVersion": "%s/%s" % (API_GROUP, API_VERSION), "kind": "ResourceClaim",
                                   "name": claim["name"], "namespace": claim["namespace"], "uid": uid},
                "reason": reason, "message": message[:1024], "type": "Warning",
                "source": {"component": "%s-kubelet-plugin" % self.driver, "host": node},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.core.create_namespaced_event(claim["namespace"], body)
            self.events.append({"uid": uid, "reason": reason, "message": message})
        except Exception as e:  # the namespace going away: the failure is still in self.failures
            self.errors.append("event for %s/%s: %s" % (claim["namespace"], claim["name"], e))

    def _fail(self, uid, claim, node, device, reason, err):
        message = "%s %s/%s: device %s on node %s: %s" % (
            "prepare" if reason == "PrepareFailed" else "unprepare", claim["namespace"], claim["name"], device, node,
            getattr(err, "msg", None) or str(err))
        if self._last_failure.get((uid, reason)) == message:
            return
        self._last_failure[(uid, reason)] = message
        self.failures.append({"uid": uid, "namespace": claim["namespace"], "name": claim["name"], "node": node,
                              "device": device, "reason": reason, "message": message})
        self._log(message)
        self._event(claim, uid, node, reason, message)

    # -- the NVML side ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _host(self, node):
        with nvml_api.open_nvml(simulator=self.hosts[node]) as nvml:
            with nvml_api.host_lock(nvml, "sim-kubelet-plugin"):
                yield nvml

    def _destroy(self, nvml, made):
        """Destroy the GPU instance of ``made`` if it is still the one made (same id, profile and start)."""
        if made.get("gpu_instance_id") is None:
            return
        gpu_state.invalidate(nvml, made["gpu"])
        facts = gpu_state.read_gpu(nvml, made["gpu"])
        mine = [i for i in facts["instances"] if i["gpu_instance_id"] == made["gpu_instance_id"]
                and i["placement"]["start"] == made["start"] and i["gpu_instance_profile_id"] == made["profile_id"]]
        if mine:
            mig_changes.destroy_instance(nvml, made["gpu"], made["gpu_instance_id"])

    def _create(self, nvml, node, device):
        index = dra_dynamic.device_gpu_minor(device)
        if index >= int(nvml.nvmlDeviceGetCount()):
            raise GpuOpsError("node %s has no GPU with minor %d (its simulator has %d GPUs)"
                              % (node, index, int(nvml.nvmlDeviceGetCount())))
        model = gpu_state.read_gpu(nvml, index)["model"]
        where = dra_dynamic.parse_device_name(device, model)
        made = {"node": node, "device": device, "gpu": index, "profile": where["profile"],
                "profile_id": where["profile_id"], "start": where["start"], "gpu_instance_id": None,
                "compute_instance_ids": []}
        if where["profile"] is None:
            return made  # the whole GPU: nothing to create
        entries = mig_changes.create_instance(nvml, index, where["profile"], where["start"])
        made["gpu_instance_id"] = int(entries[0]["gpu_instance_id"])
        made["compute_instance_ids"] = [e["compute_instance_id"] for e in entries]
        if entries[0]["placement"]["start"] != where["start"]:  # never: the create takes the placement
            mig_changes.destroy_instance(nvml, index, made["gpu_instance_id"])
            raise GpuOpsError("GPU %d: the instance came at memory slice %s, not %d"
                              % (index, entries[0]["placement"]["start"], where["start"]))
        return made

    def _prepare(self, uid, claim):
        made = []
        for node, device in claim["devices"]:
            try:
                with self._host(node) as nvml:
                    made.append(self._create(nvml, node, device))
            except GpuOpsError as e:
                for m in reversed(made):  # all or nothing: the claim's other devices go again
                    with self._host(m["node"]) as nvml:
                        self._destroy(nvml, m)
                self._fail(uid, claim, node, device, "PrepareFailed", e)
                return False
        self.prepared[uid] = {"namespace": claim["namespace"], "name": claim["name"], "devices": made}
        self._last_failure.pop((uid, "PrepareFailed"), None)
        self._log("prepared %s/%s: %s" % (claim["namespace"], claim["name"], ", ".join(
            "%s GPU %d GI %s" % (m["device"], m["gpu"], m["gpu_instance_id"]) for m in made)))
        return True

    def _unprepare(self, uid, record):
        left = []
        for m in record["devices"]:
            try:
                with self._host(m["node"]) as nvml:
                    self._destroy(nvml, m)
            except GpuOpsError as e:
                left.append(m)
                self._fail(uid, record, m["node"], m["device"], "UnprepareFailed", e)
        if left:
            record["devices"] = left
            return False
        del self.prepared[uid]
        self._last_failure.pop((uid, "UnprepareFailed"), None)
        self._log("unprepared %s/%s" % (record["namespace"], record["name"]))
        return True

    # -- one round ----------------------------------------------------------------------------------------------

    def sync(self):
        """One round: unprepare what is no longer allocated, prepare what is newly allocated. Returns
        ``{"prepared": [uid], "unprepared": [uid], "failed": [uid]}`` (empty lists when nothing changed)."""
        with self._lock:
            wanted = self._claims()
            out = {"prepared": [], "unprepared": [], "failed": []}
            for uid in sorted(self.prepared):
                record = self.prepared[uid]
                now = wanted.get(uid)
                had = [[m["node"], m["device"]] for m in record["devices"]]
                if now is not None and [list(d) for d in now["devices"]] == had:
                    continue
                (out["unprepared"] if self._unprepare(uid, record) else out["failed"]).append(uid)
            for uid in sorted(wanted, key=lambda u: (wanted[u]["namespace"], wanted[u]["name"])):
                if uid in self.prepared:
                    continue
                (out["prepared"] if self._prepare(uid, wanted[uid]) else out["failed"]).append(uid)
            for key in [k for k in self._last_failure if k[0] not in wanted and k[0] not in self.prepared]:
                del self._last_failure[key]
            if self.checkpoint and (out["prepared"] or out["unprepared"]):
                tmp = self.checkpoint + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"prepared": self.prepared}, f, indent=1, sort_keys=True)
                os.replace(tmp, self.checkpoint)
            return out

    def run(self):
        while not self.stop.is_set():
            try:
                self.sync()
            except Exception as e:  # the API busy: next round
                self.errors.append(str(e))
                del self.errors[:-20]
            self.stop.wait(self.interval)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--node", action="append", default=[], metavar="NODE=STATE_FILE", required=True,
                    help="a kwok node and its NVML simulator state file (repeat for more)")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--checkpoint", help="JSON file keeping what was made per claim across restarts")
    args = ap.parse_args(argv)

    def log(msg):
        print("%s %s" % (time.strftime("%Y-%m-%dT%H:%M:%S"), msg), flush=True)

    hosts = dict((n.split("=", 1)[0], os.path.abspath(n.split("=", 1)[1])) for n in args.node)
    from kubernetes import config as kube_config
    plugin = SimKubeletPlugin(kube_config.new_client_from_config(args.kubeconfig), hosts, interval=args.interval,
                              log=log, checkpoint=args.checkpoint)
    signal.signal(signal.SIGTERM, lambda *dummy: plugin.stop.set())
    log("preparing claims of %s every %.1fs" % (", ".join(sorted(hosts)), args.interval))
    plugin.start()
    while plugin.is_alive():
        plugin.join(1)
    log("stopped; %d claim(s) prepared, %d failure(s)" % (len(plugin.prepared), len(plugin.failures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
