"""Fleet operations on the real control plane with simulated hosts (docs/fleet-operations.md).

* a rolling MIG reconfiguration of 4 nodes (all-1g.10gb -> a mixed layout) while a deployment
  protected by a PodDisruptionBudget keeps its minimum available;
* a fault injected in the simulator on the third node: rollback (the GPUs' own layout checked in the
  simulator state, not only the label the playbook writes), node left cordoned and failed, rollout
  stopped (the fourth node untouched);
* an injected ECC error cordons exactly that node; clearing it uncordons it (after hysteresis);
* a fault that breaks the rollback too (on the fourth node): the run fails saying so, the node stays
  cordoned, and nothing claims the last good layout the GPUs are not in;
* a node whose device plugin config (ConfigMap + DaemonSet DEFAULT_CONFIG of a test-unique deployment)
  time-slices its GPUs with renameByDefault: the rollout waits for nvidia.com/gpu.shared, not for the
  mixed-strategy resources of the layout.

The device plugin is played by tests/e2e/lib/sim_device_plugin.py (a thread here): it reads each
simulated host through the collection's NVML layer and updates its kwok node, as the real plugin
would after a MIG change. A watcher records the rollout timeline node by node
and the test prints it.
"""
import sys
import threading
import time

import pytest
import yaml

from lib import gpu_nodes, playbook
from lib.sim_device_plugin import PluginConfigs, SimDevicePlugin, read_facts
from lib.wait import wait_for

TOP = gpu_nodes.TOP
MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        "mixed-a100": [{"devices": "all", "mig-enabled": True,
                        "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}],
    },
}
ALL_1G = {"nvidia.com/mig-1g.10gb": "14"}
MIXED_PROFILES = ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
ALL_1G_PROFILES = ["1g.10gb"] * 7
MIXED = {"nvidia.com/mig-3g.40gb": "2", "nvidia.com/mig-2g.20gb": "2", "nvidia.com/mig-1g.10gb": "4"}


def _playbook(args, inventory, kubeconfig, timeout=900):
    """ansible-playbook args[0] with args[1:]; returns (rc, every message the run printed, failures last)."""
    run = playbook.run(args[0], inventory=inventory, args=args[1:], kubeconfig=kubeconfig, timeout=timeout, expect_rc=None)
    return run.rc, run.text + ("\n" + run.explain() if not run.ok else "")


class Watcher(threading.Thread):
    """Records node changes (state label, cordon, MIG resources) and the PDB-protected ready count."""

    def __init__(self, api, nodes, namespace, app):
        super(Watcher, self).__init__(daemon=True)
        self.api, self.nodes, self.namespace, self.app = api, nodes, namespace, app
        self.stop = threading.Event()
        self.events, self.min_ready, self.t0 = [], None, time.time()
        self.pods_seen = set()

    def snapshot(self, node):
        labels = node.metadata.labels or {}
        alloc = node.status.allocatable or {}
        mig = ",".join("%s=%s" % (k.split("mig-")[1], v) for k, v in sorted(alloc.items())
                       if k.startswith("nvidia.com/mig-") and v != "0")
        return (labels.get("nvidia.com/mig.config"), labels.get("nvidia.com/mig.config.state"),
                "cordoned" if node.spec.unschedulable else "schedulable", mig)

    def run(self):
        last = {}
        while not self.stop.is_set():
            for name in self.nodes:
                try:
                    snap = self.snapshot(self.api.read_node(name))
                except Exception:
                    continue
                if last.get(name) != snap:
                    self.events.append((time.time() - self.t0, name, snap))
                    last[name] = snap
            pods = self.api.list_namespaced_pod(self.namespace, label_selector="app=" + self.app).items
            self.pods_seen.update(p.metadata.name for p in pods)
            ready = sum(1 for p in pods if p.metadata.deletion_timestamp is None and p.status.phase == "Running"
                        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []))
            self.min_ready = ready if self.min_ready is None else min(self.min_ready, ready)
            self.stop.wait(0.2)

    def timeline(self):
        lines = []
        for at, name, (config, state, sched, mig) in self.events:
            lines.append("%7.1fs  %-22s config=%-12s state=%-8s %-11s %s" % (at, name, config, state, sched, mig))
        return "\n".join(lines)


@pytest.fixture(scope="module")
def fleet(k8s_cluster, tmp_path_factory):
    import uuid
    from kubernetes import client
    unique = uuid.uuid4().hex[:5]
    work = tmp_path_factory.mktemp("fleet")
    (work / "files").mkdir()
    (work / "files" / "mig-config.yaml").write_text(yaml.safe_dump(MIG_CONFIG))
    names = ["fleet-%s-%d" % (unique, i) for i in range(1, 5)]
    sims = dict((n, str(work / ("%s.json" % n))) for n in names)
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {"fleet_e2e": {"hosts": dict(
                (n, {"gpuops_simulator": sims[n], "gpuops_sim_gpus": [{"model": "a100_80gb", "count": 2}],
                     "gpuops_k8s_node_name": n, "gpu_health_kernel_log_source": "none",
                     # the mig role records layouts under /etc and installs a boot unit on real hosts
                     "mig_persist": False,
                     "gpu_health_expected_gpus": 2}) for n in names)}},
        }
    }
    inv = work / "hosts.yml"
    inv.write_text(yaml.safe_dump(inventory))
    gpu_nodes.sim_hosts_at_all_1g(work, "fleet_e2e", inv, k8s_cluster.kubeconfig)
    api = k8s_cluster.core
    plugin = SimDevicePlugin(api, dict((n, {"simulator": sims[n], "mig_strategy": "mixed"}) for n in names))
    for n in names:
        gpu_nodes.ensure_node(api, n, gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="mixed",
                              mig_config={"1g.10gb": 7},
                              labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success",
                                      "e2e-fleet": unique})
    plugin.start()
    ns = "fleet-" + unique
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    apps = client.AppsV1Api(k8s_cluster.api_client())
    policy = client.PolicyV1Api(k8s_cluster.api_client())
    apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "infer"}},
                 "template": {"metadata": {"labels": {"app": "infer"}}, "spec": {
                     "nodeSelector": {"e2e-fleet": unique},
                     "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}}})
    policy.create_namespaced_pod_disruption_budget(ns, {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "infer"},
        "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "infer"}}}})

    def ready4():
        pods = api.list_namespaced_pod(ns, label_selector="app=infer").items
        return sum(1 for p in pods if p.status.phase == "Running") >= 4

    wait_for(ready4, 120, what="4 pods of the PDB-protected deployment running")
    yield {"names": names, "sims": sims, "inventory": str(inv), "api": api, "namespace": ns,
           "kubeconfig": k8s_cluster.kubeconfig, "work": work}
    plugin.stop.set()
    api.delete_namespace(ns)
    for n in names:
        gpu_nodes.delete_node(api, n)


def _layouts(fleet, name):
    """The MIG instances each GPU of the simulated host really has (its NVML state), sorted by profile."""
    return [sorted(i["profile"] for i in g["instances"]) for g in read_facts(fleet["sims"][name])["gpus"]]


def _alloc(api, name, keys):
    alloc = api.read_node(name).status.allocatable
    return dict((k, alloc.get(k)) for k in keys)


def test_check_mode_prints_the_plan_and_changes_nothing(fleet):
    api = fleet["api"]
    rc, out = _playbook(["playbooks/mig_reconfigure.yml", "--check", "-e", "target=fleet_e2e",
                         "-e", "mig_reconfigure_config=mixed-a100", "-e", "mig_reconfigure_batch_size=2"],
                        fleet["inventory"], fleet["kubeconfig"])
    assert rc == 0, out[-6000:]
    names = fleet["names"]
    assert "batches: %s | %s, %s | %s" % tuple(names) in out, out[-6000:]
    for name in names:
        node = api.read_node(name)
        assert node.metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"
        assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
        assert not node.spec.unschedulable
        assert _alloc(api, name, ALL_1G) == ALL_1G


def test_rollout_keeps_pdb_and_reaches_mixed_layout(fleet):
    api = fleet["api"]
    watcher = Watcher(api, fleet["names"], fleet["namespace"], "infer")
    watcher.start()
    start = time.time()
    rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=fleet_e2e",
                         "-e", "mig_reconfigure_config=mixed-a100", "-e", "mig_reconfigure_drain_timeout=120"],
                        fleet["inventory"], fleet["kubeconfig"])
    took = time.time() - start
    time.sleep(1)
    watcher.stop.set()
    watcher.join()
    print("\nROLLOUT TIMELINE (all-1g.10gb -> mixed-a100, canary 1 then batches of 1), %.1fs total" % took)
    print(watcher.timeline())
    print("minimum ready pods of the PDB-protected deployment (minAvailable 3): %s; pods seen: %d (4 at the start,"
          " every other one a replacement after an eviction)" % (watcher.min_ready, len(watcher.pods_seen)))
    assert rc == 0, out[-6000:]
    for name in fleet["names"]:
        node = api.read_node(name)
        assert node.metadata.labels["nvidia.com/mig.config"] == "mixed-a100"
        assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
        assert not node.spec.unschedulable
        assert _alloc(api, name, MIXED) == MIXED
        assert node.status.allocatable.get("nvidia.com/mig-1g.10gb") == "4"
    assert watcher.min_ready is not None and watcher.min_ready >= 3
    assert len(watcher.pods_seen) > 4, "no pod was evicted: the drains did not exercise the PDB"
    # canary first: the first node finished before the second was cordoned
    done = dict((n, min(t for t, m, s in watcher.events if m == n and s[1] == "success" and s[0] == "mixed-a100"))
                for n in fleet["names"])
    cordoned = dict((n, min(t for t, m, s in watcher.events if m == n and s[2] == "cordoned"))
                    for n in fleet["names"])
    order = sorted(fleet["names"], key=lambda n: cordoned[n])
    for first, second in zip(order, order[1:]):
        assert done[first] <= cordoned[second], "%s cordoned before %s finished" % (second, first)

    # idempotent: a second run plans nothing
    rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=fleet_e2e",
                         "-e", "mig_reconfigure_config=mixed-a100"], fleet["inventory"], fleet["kubeconfig"])
    assert rc == 0, out[-4000:]
    assert "skip %s (already done)" % fleet["names"][0] in out

    # a node whose GPUs already hold the layout while its label names another: the rollout takes it, the mig role has
    # nothing to change (mig_result is then its check-mode plan) and the node ends in success, not rolled back
    name = fleet["names"][0]
    api.patch_node(name, {"metadata": {"labels": {"nvidia.com/mig.config": "all-1g.10gb"}}})
    rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=fleet_e2e", "-e", "mig_reconfigure_config=mixed-a100"],
                        fleet["inventory"], fleet["kubeconfig"])
    assert rc == 0, out[-6000:]
    node = api.read_node(name)
    assert node.metadata.labels["nvidia.com/mig.config"] == "mixed-a100"
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
    assert not node.spec.unschedulable
    assert _alloc(api, name, MIXED) == MIXED


def test_fault_on_third_node_rolls_back_and_stops(fleet):
    api = fleet["api"]
    names = fleet["names"]
    third = names[2]
    fault = fleet["work"] / "fault.yml"
    fault.write_text(yaml.safe_dump([{
        "name": "Inject", "hosts": third, "gather_facts": False,
        "tasks": [{"name": "Fault", "gpuops.k8s.nvml_simulator": {
            "path": "{{ gpuops_simulator }}",
            "faults": [{"call": "nvmlDeviceCreateGpuInstanceWithPlacement",
                        "error": "NVML_ERROR_INSUFFICIENT_RESOURCES", "count": 1, "gpu": 1}]}}]}]))
    rc, out = _playbook([str(fault)], fleet["inventory"], fleet["kubeconfig"])
    assert rc == 0, out[-3000:]
    watcher = Watcher(api, names, fleet["namespace"], "infer")
    watcher.start()
    rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=fleet_e2e",
                         "-e", "mig_reconfigure_config=all-1g.10gb"], fleet["inventory"], fleet["kubeconfig"])
    time.sleep(1)
    watcher.stop.set()
    watcher.join()
    print("\nROLLOUT TIMELINE (mixed-a100 -> all-1g.10gb, fault on %s)" % third)
    print(watcher.timeline())
    assert rc != 0, out[-4000:]
    assert "Rollout stopped" in out, out[-4000:]
    assert "%s failed and was rolled back to mixed-a100" % third in out, out[-4000:]
    for name in names[:2]:
        labels = api.read_node(name).metadata.labels
        assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == ("all-1g.10gb", "success")
    node = api.read_node(third)
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "failed"
    assert node.metadata.labels["nvidia.com/mig.config"] == "mixed-a100"
    assert node.metadata.annotations["gpuops.k8s/mig.rollback"] == "succeeded"
    # the label is written by the playbook; the GPUs themselves must be back in mixed-a100
    assert _layouts(fleet, third) == [MIXED_PROFILES, MIXED_PROFILES]
    assert node.spec.unschedulable is True
    assert "INSUFFICIENT_RESOURCES" in node.metadata.annotations["gpuops.k8s/mig.failure-reason"] or \
        "Insufficient" in node.metadata.annotations["gpuops.k8s/mig.failure-reason"]
    wait_for(lambda: _alloc(api, third, MIXED) == MIXED, 30, what="rolled-back layout advertised")
    fourth = api.read_node(names[3])
    assert fourth.metadata.labels["nvidia.com/mig.config"] == "mixed-a100"
    assert fourth.metadata.labels["nvidia.com/mig.config.state"] == "success"
    assert not fourth.spec.unschedulable
    assert not [e for e in watcher.events if e[1] == names[3] and e[2][2] == "cordoned"]


def test_ecc_error_cordons_exactly_that_node_and_recovery_uncordons(fleet):
    api = fleet["api"]
    names = fleet["names"]
    # leave the rollout test's failed node out of the pool under test
    for n in names:
        gpu_nodes.ensure_node(api, n, labels={"gpuops.k8s/health.managed": "true"})
    api.patch_node(names[2], {"spec": {"unschedulable": None},
                              "metadata": {"labels": {"gpuops.k8s/health.managed": "false"}}})
    victim = names[1]

    def health(n_errors):
        play = fleet["work"] / "ecc.yml"
        play.write_text(yaml.safe_dump([{
            "name": "ECC", "hosts": victim, "gather_facts": False,
            "tasks": [{"name": "ECC", "gpuops.k8s.nvml_simulator": {
                "path": "{{ gpuops_simulator }}", "health": [{"gpu": 0, "ecc_volatile_uncorrected": n_errors}]}}]}]))
        rc, out = _playbook([str(play)], fleet["inventory"], fleet["kubeconfig"])
        assert rc == 0, out[-3000:]

    def run_health(extra=()):
        rc, out = _playbook(["playbooks/health.yml", "-e", "target=fleet_e2e",
                             "-e", "gpu_health_node_selector=e2e-fleet=" + api.read_node(names[0]).metadata.labels["e2e-fleet"],
                             "-e", "gpu_health_max_unhealthy_fraction=0.5", "-e", "gpu_health_uncordon_after=2"]
                            + list(extra), fleet["inventory"], fleet["kubeconfig"])
        assert rc == 0, out[-5000:]
        return out

    health(25)
    out = run_health()  # dry run by default: nothing changes
    assert "cordon (dry run, not applied)" in out
    assert not api.read_node(victim).spec.unschedulable
    run_health(["-e", "gpu_health_dry_run=false"])
    cordoned = [n for n in names if api.read_node(n).spec.unschedulable]
    assert cordoned == [victim]
    node = api.read_node(victim)
    assert "ECC errors 25 > 10" in node.metadata.annotations["gpuops.k8s/health.reason"]
    assert {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"} in \
        [dict(key=t.key, value=t.value, effect=t.effect) for t in node.spec.taints]
    health(0)
    run_health(["-e", "gpu_health_dry_run=false"])  # healthy 1 of 2: still cordoned (hysteresis)
    assert api.read_node(victim).spec.unschedulable
    run_health(["-e", "gpu_health_dry_run=false"])
    node = api.read_node(victim)
    assert not node.spec.unschedulable
    assert not node.spec.taints
    assert "gpuops.k8s/health.reason" not in (node.metadata.annotations or {})


def test_rollback_that_fails_too_is_reported_and_claims_nothing(fleet):
    """A permanent GPU-instance creation fault on the fourth node breaks the change and its rollback: the
    run fails saying the rollback failed, the node stays cordoned with state failed, and its labels do
    not claim the last good layout (mixed-a100) that the GPUs are not in."""
    api = fleet["api"]
    fourth = fleet["names"][3]
    assert _layouts(fleet, fourth) == [MIXED_PROFILES, MIXED_PROFILES]

    def faults(entries):
        play = fleet["work"] / "fault-permanent.yml"
        play.write_text(yaml.safe_dump([{
            "name": "Faults", "hosts": fourth, "gather_facts": False,
            "tasks": [{"name": "Faults", "gpuops.k8s.nvml_simulator": {
                "path": "{{ gpuops_simulator }}", "faults": entries}}]}]))
        rc, out = _playbook([str(play)], fleet["inventory"], fleet["kubeconfig"])
        assert rc == 0, out[-3000:]

    # no count: every creation fails, the rollback's too
    faults([{"call": "nvmlDeviceCreateGpuInstanceWithPlacement", "error": "NVML_ERROR_INSUFFICIENT_RESOURCES"}])
    try:
        rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=" + fourth,
                             "-e", "mig_reconfigure_config=all-1g.10gb"], fleet["inventory"], fleet["kubeconfig"])
    finally:
        faults([])
    assert rc != 0, out[-4000:]
    assert "%s failed and its rollback to mixed-a100 failed too" % fourth in out, out[-4000:]
    assert "Rollout stopped" in out, out[-4000:]
    node = api.read_node(fourth)
    labels, annotations = node.metadata.labels, node.metadata.annotations
    assert labels["nvidia.com/mig.config.state"] == "failed"
    # what was asked, not the last good layout: the GPUs are in neither
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
    assert annotations["gpuops.k8s/mig.rollback"] == "failed"
    assert annotations["gpuops.k8s/mig.config.attempted"] == "all-1g.10gb"
    assert annotations["gpuops.k8s/mig.config.last-good"] == "mixed-a100"
    reason = annotations["gpuops.k8s/mig.failure-reason"]
    assert "rollback to mixed-a100 failed too" in reason and reason.count("INSUFFICIENT_RESOURCES") >= 2, reason
    assert node.spec.unschedulable is True
    layouts = _layouts(fleet, fourth)
    # the host is in neither layout (a GPU the run never reached may still hold mixed-a100)
    assert layouts not in ([MIXED_PROFILES] * 2, [ALL_1G_PROFILES] * 2), layouts
    assert any(layout not in (MIXED_PROFILES, ALL_1G_PROFILES) for layout in layouts), layouts


TIME_SLICED = {"version": "v1", "flags": {"migStrategy": "none"},
               "sharing": {"timeSlicing": {"renameByDefault": True,
                                           "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}


def test_time_sliced_node_rolls_out_waiting_for_the_shared_resources(k8s_cluster, tmp_path):
    """A node whose device plugin config time-slices its GPUs (4 replicas, renameByDefault) advertises
    nvidia.com/gpu.shared, never the mixed-strategy resources mig_partition reports: the rollout from
    all-1g.10gb to all-disabled waits for 8 nvidia.com/gpu.shared and succeeds (no wrong rollback)."""
    import uuid
    from kubernetes import client
    unique = uuid.uuid4().hex[:5]
    name, plugin_ns = "fleet-ts-" + unique, "dp-" + unique
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "mig-config.yaml").write_text(yaml.safe_dump(MIG_CONFIG))
    sim = str(tmp_path / (name + ".json"))
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {"ts_e2e": {"hosts": {name: {
            "gpuops_simulator": sim, "gpuops_sim_gpus": [{"model": "a100_80gb", "count": 2}],
            "gpuops_k8s_node_name": name, "mig_persist": False}}}}}}))
    gpu_nodes.sim_hosts_at_all_1g(tmp_path, "ts_e2e", inv, k8s_cluster.kubeconfig)

    # the device plugin as gpuops.k8s.device_plugin deploys it: named configs, DEFAULT_CONFIG on the DaemonSet
    api, api_client = k8s_cluster.core, k8s_cluster.api_client()
    api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=plugin_ns)))
    api.create_namespaced_config_map(plugin_ns, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dp-configs"},
        "data": {"default": yaml.safe_dump({"version": "v1", "flags": {"migStrategy": "mixed"}}),
                 "ts-shared": yaml.safe_dump(TIME_SLICED)}})
    client.AppsV1Api(api_client).create_namespaced_daemon_set(plugin_ns, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dp"},
        "spec": {"selector": {"matchLabels": {"app": "dp"}},
                 "template": {"metadata": {"labels": {"app": "dp"}}, "spec": {
                     "nodeSelector": {"e2e-no-such-node": unique},  # no pod: the simulated plugin below plays it
                     "containers": [{"name": "nvidia-device-plugin-ctr", "image": "registry.k8s.io/pause:3.10",
                                     "env": [{"name": "DEFAULT_CONFIG", "value": "ts-shared"}]}]}}}})
    gpu_nodes.ensure_node(api, name, gpus=[{"model": "a100_80gb", "count": 2}], mig_strategy="none",
                          mig_config={"1g.10gb": 7},
                          sharing={"strategy": "time-slicing", "replicas": 4, "rename_by_default": True},
                          labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "success"})
    plugin = SimDevicePlugin(api, {name: {"simulator": sim, "mig_strategy": "mixed"}},
                             configs=PluginConfigs(api_client, plugin_ns, "dp"))
    plugin.start()
    try:
        wait_for(lambda: _alloc(api, name, ["nvidia.com/gpu.shared"]) == {"nvidia.com/gpu.shared": "8"}, 60,
                 what="the time-sliced node advertising nvidia.com/gpu.shared")
        rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=ts_e2e",
                             "-e", "mig_reconfigure_config=all-disabled", "-e", "mig_reconfigure_resources_timeout=20",
                             "-e", "mig_reconfigure_device_plugin_namespace=" + plugin_ns,
                             "-e", "mig_reconfigure_device_plugin_name=dp"],
                            str(inv), k8s_cluster.kubeconfig)
        node = api.read_node(name)
        assert rc == 0, "%s\nfailure reason: %s" % (
            out[-6000:], (node.metadata.annotations or {}).get("gpuops.k8s/mig.failure-reason"))
        labels = node.metadata.labels
        assert (labels["nvidia.com/mig.config"], labels["nvidia.com/mig.config.state"]) == ("all-disabled", "success")
        assert not node.spec.unschedulable
        assert node.status.allocatable.get("nvidia.com/gpu.shared") == "8"
        assert not [k for k, v in node.status.allocatable.items() if k.startswith("nvidia.com/mig-") and v != "0"]
        assert [g["mig_mode_current"] for g in read_facts(sim)["gpus"]] == [False, False]

        # the node now runs the mixed config but nothing publishes its new layout: the wait runs out and the
        # failure reason says what was expected and what the node advertises
        plugin.stop.set()
        plugin.join()
        api.patch_node(name, {"metadata": {"labels": {"nvidia.com/device-plugin.config": "default"}}})
        rc, out = _playbook(["playbooks/mig_reconfigure.yml", "-e", "target=ts_e2e",
                             "-e", "mig_reconfigure_config=all-1g.10gb", "-e", "mig_reconfigure_resources_timeout=4",
                             "-e", "mig_reconfigure_device_plugin_namespace=" + plugin_ns,
                             "-e", "mig_reconfigure_device_plugin_name=dp"],
                            str(inv), k8s_cluster.kubeconfig)
        assert rc != 0, out[-4000:]
        reason = api.read_node(name).metadata.annotations["gpuops.k8s/mig.failure-reason"]
        assert reason == (
            "Wait until the node advertises the new resources: after 4s expected nvidia.com/gpu=0, "
            "nvidia.com/mig-1g.10gb=14 (device plugin config 'default': migStrategy mixed, no sharing), the node "
            "advertises nvidia.com/gpu.shared=8 (left over: nvidia.com/gpu.shared=8)"), reason
    finally:
        plugin.stop.set()
        api.delete_namespace(plugin_ns)
        gpu_nodes.delete_node(api, name)
