"""Every playbook of the collection against the simulated lab (inventories/sim/hosts.yml, unchanged)
and the real local control plane, as docs/simulated-lab.md tells a user to run them.

The lab's four hosts (8x A100 80GB, 8x H100, 8x H200, 4x L40S) keep their NVML simulator states,
file-system stand-ins and kernel logs in a temporary directory (``-e gpuops_sim_dir=...``); their
kwok nodes are published from the inventory as ``make cluster-up`` does, and the simulated device
plugin (tests/e2e/lib/sim_device_plugin.py, a thread here) publishes each host's live MIG layout on
its node, as ``make cluster-up`` runs it for the lab.

lab/sim_lab.yml -> site.yml --check (nothing changes) -> site.yml (hosts, stack, tenancy) -> site.yml
again (changed=0 on every host) -> site.yml --check again (the capacity check now passes with the default
policy) -> gpu_nodes.yml, k8s_gpu_stack.yml, tenancy.yml each alone
(changed=0) -> a per-node device plugin config change (the simulated plugin advertises what the
node's config says) -> mig_reconfigure.yml on the A100 pool -> gpu_nodes.yml refuses to undo it
while the inventory names the old config -> health.yml with an Xid injected in a host's kernel log
(armed: cordons exactly that node; cleared: uncordons it) -> mig_reconfigure.yml over three pools
with a failure budget of 1 and a fault on the second node -> lab/demo_mig.yml. Everything the run created in the cluster is removed at the end.
"""
import json
import os
import time

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lib import gpu_nodes
from lib import playbook as play_lib
from lib.sim_device_plugin import PluginConfigs, SimDevicePlugin, hosts_from_fleet
from lib.wait import wait_for

TOP = gpu_nodes.TOP
INVENTORY = os.path.join("inventories", "sim", "hosts.yml")
HOSTS = ("dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01")
NAMESPACES = ("nvidia-device-plugin", "gpu-monitoring", "monitoring", "inference", "research")
PRIORITY_CLASSES = ("gpu-critical", "gpu-high", "gpu-low")
CAPACITY_TASK = "Validate tenants, quotas, priority classes and capacity (fails before any object changes)"


def playbook(lab, name, *extra, **kw):
    """ansible-playbook -i inventories/sim/hosts.yml playbooks/<name> -> lib.playbook.Run (timed in lab["times"])."""
    run = play_lib.run(os.path.join("playbooks", name), inventory=INVENTORY, kubeconfig=lab["kubeconfig"],
                       args=["-e", "gpuops_sim_dir=" + lab["sim_dir"]] + list(extra), timeout=kw.get("timeout", 900),
                       expect_rc=kw.get("expect_rc", 0))
    lab["times"].append((" ".join([name] + list(extra)), run.seconds))
    return run


def live_facts(lab, host):
    from lib.sim_device_plugin import read_facts
    return read_facts(os.path.join(lab["sim_dir"], host + ".json"))


def profiles(facts, gpu):
    return sorted(i["profile"] for i in facts["gpus"][gpu]["instances"])


@pytest.fixture(scope="module")
def lab(k8s_cluster, tmp_path_factory):
    api = k8s_cluster.core
    sim_dir = str(tmp_path_factory.mktemp("sim-lab"))
    fleet = gpu_nodes.fleet_from_inventory(os.path.join(TOP, INVENTORY))
    assert sorted(fleet) == sorted(HOSTS)
    existed = set()
    for pc in PRIORITY_CLASSES:
        try:
            client.SchedulingV1Api(k8s_cluster.api_client()).read_priority_class(pc)
            existed.add(pc)
        except ApiException:
            pass
    gpu_nodes.apply_fleet(k8s_cluster.kubeconfig, fleet)
    plugin = SimDevicePlugin(api, hosts_from_fleet(fleet, sim_dir), interval=0.5,
                             configs=PluginConfigs(k8s_cluster.api_client()))
    plugin.start()
    state = {"kubeconfig": k8s_cluster.kubeconfig, "sim_dir": sim_dir, "api": api, "plugin": plugin,
             "times": [], "cluster": k8s_cluster}
    yield state
    plugin.stop.set()
    print("\nsimulated lab, playbook wall times (s):\n" + "\n".join("  %6.1f  %s" % (t, n) for n, t in state["times"]))
    for ns in NAMESPACES:
        try:
            api.delete_namespace(ns)
        except ApiException:
            pass
    gpu_nodes.delete_priority_classes(client.SchedulingV1Api(k8s_cluster.api_client()), keep=existed)
    for name in HOSTS:
        gpu_nodes.delete_node(api, name)


def test_sim_lab_creates_the_hosts(lab):
    out = playbook(lab, "lab/sim_lab.yml", "-e", "sim_lab_reset=true")
    assert set(out.stats) == set(HOSTS)
    facts = live_facts(lab, "hgx-h200-01")
    assert len(facts["gpus"]) == 8 and facts["driver_version"] == "550.127.08"
    again = playbook(lab, "lab/sim_lab.yml")
    assert all(s["changed"] == 0 for s in again.stats.values()), again.stats


def test_site_check_mode_changes_nothing(lab):
    # the capacity check judges the cluster as it is: before the MIG layouts exist nothing advertises
    # the quotas' MIG slices, so a check run of a fresh lab accepts the overcommit with a warning
    out = playbook(lab, "site.yml", "--check", "--diff", "-e", "gpu_tenancy_capacity_policy=warn")
    stats = out.stats
    assert set(stats) == set(HOSTS) | {"localhost"}
    assert all(s["failures"] == 0 and s["unreachable"] == 0 for s in stats.values()), stats
    # ... and it is the overcommit docs/simulated-lab.md describes: MIG quotas against no MIG slices yet
    capacity = out.by_host(CAPACITY_TASK)["localhost"]["capacity"]
    assert "nvidia.com/mig-1g.10gb" in capacity["overcommitted"], capacity
    assert capacity["resources"]["nvidia.com/mig-1g.10gb"]["allocatable"] == 0, capacity
    # the plan is there: MIG changes per host, the stack and the tenants
    plan = out.by_host("Plan the layout (validates it on every GPU; changes nothing)")
    assert plan["dgx-a100-01"]["changed"] and not plan["l40s-01"]["changed"]
    assert all(not g["instances"] for g in live_facts(lab, "dgx-a100-01")["gpus"])
    assert not os.path.exists(os.path.join(lab["sim_dir"], "dgx-a100-01.root"))
    with pytest.raises(ApiException):
        lab["api"].read_namespace("inference")


def test_site_sets_up_hosts_and_cluster(lab):
    out = playbook(lab, "site.yml")
    stats = out.stats
    assert all(s["failures"] == 0 for s in stats.values()), stats
    # hosts: the driver plan came from the simulated GPUs; nothing was installed on this machine
    plans = out.by_host("Show the driver plan")
    assert "GPUs h200_141gb" in plans["hgx-h200-01"]["msg"] and "Fabric Manager True" in plans["hgx-h200-01"]["msg"]
    verify = out.by_host("Check the running driver is on the chosen branch")
    assert verify["dgx-a100-01"]["msg"] == "driver 550.127.08 with 8 GPU(s)"
    root = os.path.join(lab["sim_dir"], "hgx-h100-01.root")
    assert os.path.isfile(os.path.join(root, "etc/modprobe.d/gpuops-blacklist-nouveau.conf"))
    dropin = open(os.path.join(root, "etc/containerd/conf.d/99-gpuops-nvidia.toml")).read()
    assert 'BinaryName = "/usr/bin/nvidia-container-runtime"' in dropin
    assert 'imports = ["/etc/containerd/conf.d/*.toml"]' in open(os.path.join(root, "etc/containerd/config.toml")).read()
    # MIG: each host's gpuops_mig_config
    a100 = live_facts(lab, "dgx-a100-01")
    assert all(profiles(a100, i) == ["1g.10gb"] * 7 for i in range(8))
    h100 = live_facts(lab, "hgx-h100-01")
    assert profiles(h100, 0) == ["3g.40gb", "3g.40gb"] and profiles(h100, 4) == ["1g.10gb"] * 3 + ["4g.40gb"]
    h200 = live_facts(lab, "hgx-h200-01")
    assert profiles(h200, 7) == ["1g.18gb"] * 3 + ["4g.71gb"]
    assert not any(g["mig_mode_current"] for g in live_facts(lab, "l40s-01")["gpus"])
    # cluster: the simulated device plugin published the layouts; the stack and tenants exist
    api = lab["api"]
    wait_for(lambda: api.read_node("dgx-a100-01").status.allocatable.get("nvidia.com/mig-1g.10gb") == "56", 30,
             what="dgx-a100-01 advertising 56 mig-1g.10gb")
    h200_alloc = api.read_node("hgx-h200-01").status.allocatable
    assert h200_alloc["nvidia.com/mig-3g.71gb"] == "8" and h200_alloc["nvidia.com/mig-4g.71gb"] == "4"
    assert api.read_node("l40s-01").status.allocatable["nvidia.com/gpu"] == "16"
    labels = dict((n, api.read_node(n).metadata.labels.get("nvidia.com/device-plugin.config")) for n in HOSTS)
    assert labels == {"dgx-a100-01": "mig-mixed", "hgx-h100-01": "mig-mixed", "hgx-h200-01": "mig-mixed",
                      "l40s-01": "time-sliced-4"}
    apps = client.AppsV1Api(lab["cluster"].api_client())
    ds = apps.read_namespaced_daemon_set("nvidia-device-plugin", "nvidia-device-plugin")
    plugin = [c for c in ds.spec.template.spec.containers if c.name == "nvidia-device-plugin"][0]
    assert plugin.image == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert dict((e.name, e.value) for e in plugin.env)["CONFIG_FILE"] == "/config/config.yaml"
    # one pod per GPU node of the lab, none elsewhere
    wait_for(lambda: apps.read_namespaced_daemon_set_status(
        "nvidia-device-plugin", "nvidia-device-plugin").status.desired_number_scheduled == len(HOSTS), 30,
        what="the device plugin DaemonSet on the %d GPU nodes" % len(HOSTS))
    hard = api.read_namespaced_resource_quota("gpu-quota", "inference").spec.hard
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "28"
    hpa = client.AutoscalingV2Api(lab["cluster"].api_client()).read_namespaced_horizontal_pod_autoscaler(
        "llm-server", "inference")
    assert hpa.spec.max_replicas == 8


def test_site_second_run_changes_nothing(lab):
    out = playbook(lab, "site.yml")
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in out.stats.values()), out.all_changed()


def test_site_check_mode_after_the_real_run_passes_the_capacity_check(lab):
    """docs/simulated-lab.md: after the real run the same ``site.yml --check`` capacity check passes, with
    the default policy (fail) instead of the warn override the fresh lab needs."""
    out = playbook(lab, "site.yml", "--check", "--diff")
    stats = out.stats
    assert all(s["failures"] == 0 and s["unreachable"] == 0 and s["changed"] == 0 for s in stats.values()), \
        (stats, out.all_changed())
    validate = out.by_host(CAPACITY_TASK)["localhost"]
    capacity = validate["capacity"]
    assert capacity["overcommitted"] == [], capacity
    assert not [w for w in validate.get("warnings", []) if "allocatable" in w], validate["warnings"]
    mig = capacity["resources"]["nvidia.com/mig-1g.10gb"]
    assert 0 < mig["quota"] <= mig["allocatable"], mig


@pytest.mark.parametrize("part", ["gpu_nodes.yml", "k8s_gpu_stack.yml", "tenancy.yml"])
def test_each_part_of_site_runs_alone_without_change(lab, part):
    out = playbook(lab, part)
    assert out.stats and all(s["changed"] == 0 and s["failures"] == 0 for s in out.stats.values()), \
        out.all_changed()


def test_each_node_advertises_what_its_device_plugin_config_says(lab):
    """The simulated device plugin follows the deployed configs: the L40S node switched to the default config
    (no sharing) advertises its 4 GPUs; back on time-sliced-4, 16 replicas."""
    api = lab["api"]
    playbook(lab, "k8s_gpu_stack.yml", "-e", json.dumps({"device_plugin_node_configs": {"l40s-01": "default"}}))
    assert api.read_node("l40s-01").metadata.labels["nvidia.com/device-plugin.config"] == "default"
    wait_for(lambda: api.read_node("l40s-01").status.allocatable["nvidia.com/gpu"] == "4", 30,
             what="l40s-01 advertising 4 unshared GPUs")
    assert api.read_node("l40s-01").metadata.labels["nvidia.com/gpu.sharing-strategy"] == "none"
    playbook(lab, "k8s_gpu_stack.yml")
    wait_for(lambda: api.read_node("l40s-01").status.allocatable["nvidia.com/gpu"] == "16", 30,
             what="l40s-01 advertising 16 time-sliced replicas")
    assert api.read_node("l40s-01").metadata.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


def test_mig_reconfigure_rolls_the_a100_pool(lab):
    api = lab["api"]
    plan = playbook(lab, "mig_reconfigure.yml", "-e", "target=a100_nodes", "-e", "mig_reconfigure_config=all-3g.40gb",
                    "--check")
    assert plan.stats["dgx-a100-01"]["failures"] == 0
    assert api.read_node("dgx-a100-01").status.allocatable.get("nvidia.com/mig-1g.10gb") == "56"
    playbook(lab, "mig_reconfigure.yml", "-e", "target=a100_nodes", "-e", "mig_reconfigure_config=all-3g.40gb")
    node = api.read_node("dgx-a100-01")
    assert node.metadata.labels["nvidia.com/mig.config"] == "all-3g.40gb"
    assert node.metadata.labels["nvidia.com/mig.config.state"] == "success"
    assert not node.spec.unschedulable
    assert node.status.allocatable["nvidia.com/mig-3g.40gb"] == "16"
    assert node.status.allocatable.get("nvidia.com/mig-1g.10gb", "0") == "0"
    assert all(profiles(live_facts(lab, "dgx-a100-01"), i) == ["3g.40gb"] * 2 for i in range(8))


def test_gpu_nodes_does_not_undo_the_rollout(lab):
    """The A100 pool now runs all-3g.40gb while the inventory still says all-1g.10gb: gpu_nodes.yml (which does not
    drain) stops before the mig role with a message naming both configs, and the layout stays; once the inventory
    says the new config (here an extra var), the same play changes nothing."""
    before = live_facts(lab, "dgx-a100-01")
    out = playbook(lab, "gpu_nodes.yml", "-e", "target=a100_nodes", expect_rc=2)
    refused = out.by_host("Refuse to undo a MIG rollout")["dgx-a100-01"]
    assert refused.get("failed") and "'all-3g.40gb'" in refused["msg"] and "'all-1g.10gb'" in refused["msg"], refused
    assert "mig_reconfigure.yml" in refused["msg"]
    assert live_facts(lab, "dgx-a100-01")["gpus"] == before["gpus"]
    out = playbook(lab, "gpu_nodes.yml", "-e", "target=a100_nodes", "-e", "gpuops_mig_config=all-3g.40gb")
    assert all(s["changed"] == 0 and s["failures"] == 0 for s in out.stats.values()), out.all_changed()


def test_health_cordons_the_node_with_an_xid_and_uncordons_it(lab):
    api = lab["api"]
    out = playbook(lab, "health.yml")
    assert all(s["failures"] == 0 for s in out.stats.values())
    assert not any(api.read_node(n).spec.unschedulable for n in HOSTS)
    h200 = live_facts(lab, "hgx-h200-01")
    bus = h200["gpus"][3]["pci_bus_id"][4:].lower()  # the kernel prints 0000:BB:DD.F
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime())
    kmsg = os.path.join(lab["sim_dir"], "hgx-h200-01.kmsg")
    with open(kmsg, "w") as f:
        f.write("%s hgx-h200-01 kernel: NVRM: Xid (PCI:%s): 79, pid=0, name=python, GPU has fallen off the bus.\n"
                % (stamp, bus[:-2]))
    playbook(lab, "health.yml", "-e", "gpu_health_dry_run=false", "-e", "gpu_health_uncordon_after=1")
    nodes = dict((n, api.read_node(n)) for n in HOSTS)
    assert [n for n, v in nodes.items() if v.spec.unschedulable] == ["hgx-h200-01"]
    reason = nodes["hgx-h200-01"].metadata.annotations["gpuops.k8s/health.reason"]
    assert "Xid 79" in reason, reason
    assert any(t.key == "nvidia.com/gpu-error" for t in nodes["hgx-h200-01"].spec.taints or [])
    open(kmsg, "w").close()
    playbook(lab, "health.yml", "-e", "gpu_health_dry_run=false", "-e", "gpu_health_uncordon_after=1")
    node = api.read_node("hgx-h200-01")
    assert not node.spec.unschedulable
    assert not any(t.key == "nvidia.com/gpu-error" for t in node.spec.taints or [])


def test_rollout_goes_on_within_its_failure_budget(lab, tmp_path):
    """The three MIG pools to all-disabled, no canary, batches of 1, failure budget 1, with a MIG mode change
    failing once on the H100 host (NVML_ERROR_UNKNOWN: not transient, so mig_mode does not try it again; an IN_USE
    would be retried within the run, nvml/retry.py): that node rolls back to the layout the inventory set it up with (it has no
    mig.config label) and stays cordoned, the rollout goes on to the H200, and the run fails at the end naming
    the H100."""
    api = lab["api"]
    before = live_facts(lab, "hgx-h100-01")
    inject = tmp_path / "inject.yml"
    inject.write_text(json.dumps([{
        "name": "Inject", "hosts": "hgx-h100-01", "gather_facts": False,
        "tasks": [{"name": "Fault", "gpuops.k8s.nvml_simulator": {
            "path": "{{ gpuops_simulator }}",
            "faults": [{"call": "nvmlDeviceSetMigMode", "error": "NVML_ERROR_UNKNOWN", "count": 1, "gpu": 0}]}}]}]))
    playbook(lab, str(inject))
    out = playbook(lab, "mig_reconfigure.yml", "-e", "target=a100_nodes:h100_nodes:h200_nodes",
                   "-e", "mig_reconfigure_config=all-disabled", "-e", "mig_reconfigure_canary=0",
                   "-e", "mig_reconfigure_failure_budget=1", expect_rc=None)
    final = out.by_host("Fail when a node failed within the budget")["localhost"]
    assert final.get("failed") and "hgx-h100-01" in final["msg"], final
    for name in ("dgx-a100-01", "hgx-h200-01"):
        node = api.read_node(name)
        assert (node.metadata.labels["nvidia.com/mig.config"], node.metadata.labels["nvidia.com/mig.config.state"]) \
            == ("all-disabled", "success")
        assert not node.spec.unschedulable
        gpus = live_facts(lab, name)["gpus"]
        assert node.status.allocatable["nvidia.com/gpu"] == "8", (
            name, node.status.allocatable, [(g["mig_mode_current"], g["mig_mode_pending"], len(g["instances"])) for g in gpus])
    h100 = api.read_node("hgx-h100-01")
    assert h100.metadata.labels["nvidia.com/mig.config.state"] == "failed"
    assert h100.metadata.labels["nvidia.com/mig.config"] == "h100-mixed"
    assert h100.spec.unschedulable
    assert "NVML_ERROR_UNKNOWN" in h100.metadata.annotations["gpuops.k8s/mig.failure-reason"], h100.metadata.annotations
    assert h100.metadata.annotations["gpuops.k8s/mig.rollback"] == "succeeded"
    # the label is the playbook's word; the GPUs' own state (simulator) shows the rollback happened
    after = live_facts(lab, "hgx-h100-01")
    assert [profiles(after, i) for i in range(8)] == [profiles(before, i) for i in range(8)]
    assert [g["mig_mode_current"] for g in after["gpus"]] == [g["mig_mode_current"] for g in before["gpus"]] == [True] * 8
    assert not any(g["mig_mode_pending"] != g["mig_mode_current"] for g in after["gpus"])


def test_demo_runs_on_the_lab(lab):
    out = playbook(lab, "lab/demo_mig.yml")
    assert all(s["failures"] == 0 for s in out.stats.values())
    day2 = out.by_host("Day 2 - only the difference was touched; the busy 4g.40gb (*) kept running")
    assert day2["hgx-h100-01"]["msg"][0].startswith("hgx-h100-01 (h100-day2): kept 16, destroyed 6, created 2")
