# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The shipped inventories are consistent: every name a host refers to exists where it is looked up.

(The simulated lab runs every playbook end to end in tests/e2e/test_sim_lab.py; the example site
cannot run here, so its cross-references are checked statically.)
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def inventory(name):
    path = os.path.join(TOP, "inventories", name, "hosts.yml")
    exe = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
    proc = subprocess.run([exe, "-i", path, "--list"], cwd=TOP, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=True)
    data = json.loads(proc.stdout)
    hosts = data["_meta"]["hostvars"]
    gpu_hosts = set()

    def walk(group):
        gpu_hosts.update(data.get(group, {}).get("hosts", []))
        for child in data.get(group, {}).get("children", []):
            walk(child)
    walk("gpu_nodes")
    return path, hosts, sorted(gpu_hosts)


@pytest.mark.parametrize("name", ["sim", "example"])
def test_every_gpu_host_names_an_existing_mig_config_and_device_plugin_config(name):
    path, hosts, gpu_hosts = inventory(name)
    assert gpu_hosts
    with open(os.path.join(os.path.dirname(path), "files", "mig-config.yaml")) as f:
        mig_configs = yaml.safe_load(f)["mig-configs"]
    with open(os.path.join(os.path.dirname(path), "group_vars", "all.yml")) as f:
        all_vars = yaml.safe_load(f)
    plugin_configs = all_vars["device_plugin_configs"]
    for host in gpu_hosts:
        hv = hosts[host]
        assert hv["gpuops_mig_config"] in mig_configs, (host, hv["gpuops_mig_config"], sorted(mig_configs))
        assert hv["device_plugin_node_config"] in plugin_configs, (host, sorted(plugin_configs))
        assert isinstance(hv["gpu_health_expected_gpus"], int)
    assert all_vars["gpu_tenancy_tenants"]


def test_become_only_on_the_gpu_hosts_of_the_example_site():
    """The cluster-side plays run on the controller's implicit localhost, which takes group_vars/all."""
    with open(os.path.join(TOP, "inventories", "example", "group_vars", "all.yml")) as f:
        assert "ansible_become" not in yaml.safe_load(f)
    path, hosts, gpu_hosts = inventory("example")
    assert all(hosts[h].get("ansible_become") is True for h in gpu_hosts)
