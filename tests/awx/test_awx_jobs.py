# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every job template of awx/job_templates.yml launched as AWX launches it (tests/awx/awxlib/awx_jobs.py):
ansible-runner of a fresh execution environment (only what execution-environment/ declares), a private data dir
with the inventory AWX stores for inventories/sim/hosts.yml, the survey's defaults (one job) and one non-default
answer (another job), ``--limit`` where the template asks for it; then job slicing as AWX does it.

Each job is judged as AWX's job page shows it: status, failed and unreachable hosts, the tasks that changed.
The lab: the simulated hosts of inventories/sim, their kwok nodes and the simulated device plugin (a thread), on
the local control plane. Wall times and event counts are printed at the end (docs/awx.md).
"""
import json
import os
import subprocess
import time

import pytest
from kubernetes.client.rest import ApiException

from awxlib import awx_jobs, environments
from lib import gpu_nodes
from lib.sim_device_plugin import PluginConfigs, SimDevicePlugin, hosts_from_fleet, read_facts
from lib.wait import wait_for

TOP = environments.TOP
INVENTORY = os.path.join(TOP, "inventories", "sim", "hosts.yml")
HOSTS = ("dgx-a100-01", "hgx-h100-01", "hgx-h200-01", "l40s-01")
NAMESPACES = ("nvidia-device-plugin", "gpu-monitoring", "monitoring", "inference", "research")
TEMPLATES = dict((t["survey"], t) for t in awx_jobs.job_templates())
RESULTS = []


@pytest.fixture(scope="module")
def lab(k8s_cluster, ee, tmp_path_factory):
    api = k8s_cluster.core
    sim_dir = str(tmp_path_factory.mktemp("awx-sim"))
    fleet = gpu_nodes.fleet_from_inventory(INVENTORY)
    gpu_nodes.apply_fleet(k8s_cluster.kubeconfig, fleet)
    plugin = SimDevicePlugin(api, hosts_from_fleet(fleet, sim_dir), interval=0.5,
                             configs=PluginConfigs(k8s_cluster.api_client()))
    plugin.start()
    stored = awx_jobs.export_inventory(ee, INVENTORY)
    launcher = awx_jobs.Launcher(
        ee, stored, str(tmp_path_factory.mktemp("awx-jobs")),
        # what an AWX admin sets on the inventory: inventory_dir is the job's private inventory dir in AWX
        inventory_vars={"gpuops_sim_dir": sim_dir,
                        "gpuops_mig_config_file": "{{ playbook_dir }}/../inventories/sim/files/mig-config.yaml"},
        # the cluster credential
        job_env={"KUBECONFIG": k8s_cluster.kubeconfig})
    sim_lab = {"name": "simulated lab hosts", "playbook": "playbooks/lab/sim_lab.yml"}
    made = launcher.launch(sim_lab, {"sim_lab_reset": True})
    assert made.status == "successful", made.failures()
    state = {"api": api, "launcher": launcher, "sim_dir": sim_dir, "stored": stored, "cluster": k8s_cluster}
    yield state
    plugin.stop.set()
    print("\nAWX jobs through ansible-runner (EE %s):" % ee.root)
    for r in RESULTS:
        print("  " + json.dumps(dict((k, v) for k, v in r.summary().items() if k != "recap")))
    for ns in NAMESPACES:
        try:
            api.delete_namespace(ns)
        except ApiException:
            pass
    for name in HOSTS:
        gpu_nodes.delete_node(api, name)


def launch(lab, survey, answers=None, **kw):
    template = TEMPLATES[survey]
    result = lab["launcher"].launch(template, awx_jobs.survey_extra_vars(template, answers), **kw)
    RESULTS.append(result)
    return result


def roles_ran(result, role):
    """Hosts on which a task of ``role`` ran (ok or changed, not skipped)."""
    return set(e["event_data"].get("host") for e in result.host_events("runner_on_ok")
               if (e["event_data"].get("role") or "").split(".")[-1] == role)


def assert_successful(result, hosts=None):
    assert result.status == "successful" and result.rc == 0, (result.summary(), result.failures())
    assert result.failed_hosts == [] and result.unreachable_hosts == []
    if hosts is not None:
        assert result.hosts == sorted(hosts), result.hosts


def test_the_ee_has_what_the_jobs_use(ee):
    """Collections the EE declares but that cannot be had without Galaxy are named, and no job uses them."""
    assert ee.collections.get("kubernetes.core") == "6.6.0" and "gpuops.k8s" in ee.collections
    assert set(ee.unresolved) <= {"awx.awx"}, ee.unresolved  # awx/configure.yml only (talks to the AWX API)
    for name in ee.unresolved:
        for folder in ("playbooks", "roles", "plugins"):
            for root, _dirs, files in os.walk(os.path.join(TOP, folder)):
                for f in files:
                    if f.endswith((".yml", ".py")):
                        with open(os.path.join(root, f)) as handle:
                            assert name + "." not in handle.read(), "%s uses %s, which the EE lacks" % (f, name)
    # only the EE's packages: the job interpreter has no pynvml (GPU-host only) and no test toolchain
    py = ee.python
    probe = "import importlib.util as u; print([m for m in ('kubernetes', 'jsonpatch', 'ansible_runner', 'pynvml', 'pytest') if u.find_spec(m)])"
    out = subprocess.run([py, "-c", probe], stdout=subprocess.PIPE, universal_newlines=True, env=ee.env(), check=True)
    assert out.stdout.strip() == "['kubernetes', 'jsonpatch', 'ansible_runner']"


def test_site_defaults(lab):
    result = launch(lab, "site")
    assert_successful(result, hosts=HOSTS + ("localhost",))
    assert sorted(result.results("Show the driver plan")) == sorted(HOSTS)
    changed = result.changed_tasks
    for host in HOSTS:
        assert any(t.startswith(host + ": ") for t in changed), (host, changed)
    assert any(t.startswith("localhost: ") for t in changed), changed
    wait_for(lambda: lab["api"].read_node("dgx-a100-01").status.allocatable.get("nvidia.com/mig-1g.10gb") == "56", 30,
             what="dgx-a100-01 advertising 56 mig-1g.10gb")


def test_site_one_answer_and_a_limit(lab):
    """No driver step, limited to one host and the controller: nothing left to change."""
    result = launch(lab, "site", {"gpu_nodes_driver": "false"}, limit="dgx-a100-01,localhost")
    assert_successful(result, hosts=("dgx-a100-01", "localhost"))
    assert result.changed_tasks == []
    assert not result.results("Show the driver plan"), "the driver role ran although the survey said false"


def test_gpu_nodes_defaults_then_without_mig_on_one_pool(lab):
    result = launch(lab, "gpu_nodes")
    assert_successful(result, hosts=HOSTS)
    assert result.changed_tasks == []
    assert roles_ran(result, "mig") == set(HOSTS)
    limited = launch(lab, "gpu_nodes", {"gpu_nodes_mig": "false"}, limit="l40s_nodes")
    assert_successful(limited, hosts=("l40s-01",))
    assert roles_ran(limited, "mig") == set(), "the mig role ran although the survey said false"
    assert roles_ran(limited, "nvidia_driver") == {"l40s-01"}


def test_slices_run_every_host_exactly_once(lab):
    """gpu_nodes sliced 3 ways: 3 jobs in parallel on sorted(hosts)[k-1::3]; every host in exactly one slice."""
    template = TEMPLATES["gpu_nodes"]
    assert template["job_slice_count"] == "{{ gpuops_awx_job_slice_count }}"
    jobs = lab["launcher"].launch_sliced(template, awx_jobs.survey_extra_vars(template), 3)
    RESULTS.extend(jobs)
    assert [j.slice_count for j in jobs] == [3, 3, 3]
    seen = []
    for job in jobs:
        assert_successful(job)
        assert job.changed_tasks == []
        seen += job.hosts
    assert [j.hosts for j in jobs] == [["dgx-a100-01", "l40s-01"], ["hgx-h100-01"], ["hgx-h200-01"]]
    assert sorted(seen) == sorted(HOSTS)  # exactly once each
    # more slices than hosts: AWX makes one job per host, no more
    assert awx_jobs.effective_slice_count(10, HOSTS) == 4


def test_k8s_gpu_stack_defaults_then_without_dcgm(lab):
    result = launch(lab, "k8s_gpu_stack")
    assert_successful(result)
    assert result.changed_tasks == []
    assert roles_ran(result, "dcgm_exporter") == {"localhost"}
    without = launch(lab, "k8s_gpu_stack", {"k8s_gpu_stack_dcgm_exporter": "false"})
    assert_successful(without)
    assert roles_ran(without, "dcgm_exporter") == set()
    assert roles_ran(without, "device_plugin") == {"localhost"}
    assert without.changed_tasks == []


def test_tenancy_defaults_then_without_hpas(lab):
    result = launch(lab, "tenancy")
    assert_successful(result, hosts=("localhost",))
    assert result.changed_tasks == []
    assert roles_ran(result, "gpu_autoscaling") == {"localhost"}
    without = launch(lab, "tenancy", {"tenancy_autoscaling": "false"})
    assert_successful(without, hosts=("localhost",))
    assert roles_ran(without, "gpu_autoscaling") == set()
    assert roles_ran(without, "gpu_tenancy") == {"localhost"}


def test_mig_reconfigure_needs_its_config_then_check_then_run(lab):
    template = TEMPLATES["mig_reconfigure"]
    with pytest.raises(ValueError, match="required"):
        awx_jobs.survey_extra_vars(template)  # AWX refuses the launch: the config question has no default
    answers = {"target": "a100_nodes", "mig_reconfigure_config": "all-3g.40gb"}
    check = launch(lab, "mig_reconfigure", answers, job_type="check")
    assert_successful(check)
    assert lab["api"].read_node("dgx-a100-01").status.allocatable.get("nvidia.com/mig-1g.10gb") == "56"
    run = launch(lab, "mig_reconfigure", answers)
    assert_successful(run, hosts=("dgx-a100-01", "localhost"))
    assert any(t.startswith("dgx-a100-01: ") for t in run.changed_tasks), run.changed_tasks
    node = lab["api"].read_node("dgx-a100-01")
    assert (node.metadata.labels["nvidia.com/mig.config"], node.metadata.labels["nvidia.com/mig.config.state"]) \
        == ("all-3g.40gb", "success")
    assert node.status.allocatable["nvidia.com/mig-3g.40gb"] == "16" and not node.spec.unschedulable


def test_health_dry_run_then_armed(lab):
    api = lab["api"]
    dry = launch(lab, "health")
    assert_successful(dry)
    assert dry.changed_tasks == []
    h200 = read_facts(os.path.join(lab["sim_dir"], "hgx-h200-01.json"))
    bus = h200["gpus"][3]["pci_bus_id"][4:].lower()[:-2]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime())
    kmsg = os.path.join(lab["sim_dir"], "hgx-h200-01.kmsg")
    with open(kmsg, "w") as f:
        f.write("%s hgx-h200-01 kernel: NVRM: Xid (PCI:%s): 79, pid=0, name=python, GPU has fallen off the bus.\n"
                % (stamp, bus))
    try:
        armed = launch(lab, "health", {"gpu_health_dry_run": "false"})
        assert_successful(armed)
        assert armed.changed_tasks == ["localhost: Apply the node patches"], armed.changed_tasks
        cordoned = [n for n in HOSTS if api.read_node(n).spec.unschedulable]
        assert cordoned == ["hgx-h200-01"]
        assert "Xid 79" in api.read_node("hgx-h200-01").metadata.annotations["gpuops.k8s/health.reason"]
    finally:
        open(kmsg, "w").close()
        api.patch_node("hgx-h200-01", {"spec": {"unschedulable": None, "taints": None},
                                       "metadata": {"annotations": {"gpuops.k8s/health.cordoned-by": None}}})


@pytest.mark.parametrize("survey,answers,why", [
    ("mig_reconfigure", {"target": "a100_nodes:h100_nodes", "mig_reconfigure_config": "all-disabled"}, "canary"),
    ("health", {"gpu_health_dry_run": "false"}, "gpu_health_max_unhealthy_fraction"),
])
def test_pool_templates_refuse_slicing(lab, survey, answers, why):
    """Set to slice anyway (job_slice_count is 1 in job_templates.yml), each slice stops before touching anything."""
    template = TEMPLATES[survey]
    assert template["job_slice_count"] == 1
    before = dict((n, lab["api"].read_node(n).metadata.labels.get("nvidia.com/mig.config")) for n in HOSTS)
    jobs = lab["launcher"].launch_sliced(template, awx_jobs.survey_extra_vars(template, answers), 2)
    RESULTS.extend(jobs)
    for job in jobs:
        assert job.status == "failed" and job.failed_hosts == ["localhost"], job.summary()
        refused = job.results("Refuse to run as one slice of a sliced AWX job")["localhost"]
        assert refused["_event"] == "runner_on_failed" and why in refused["msg"], refused
        assert job.hosts == ["localhost"] and job.changed_tasks == []
    after = dict((n, lab["api"].read_node(n).metadata.labels.get("nvidia.com/mig.config")) for n in HOSTS)
    assert after == before
    assert not any(lab["api"].read_node(n).spec.unschedulable for n in HOSTS)
