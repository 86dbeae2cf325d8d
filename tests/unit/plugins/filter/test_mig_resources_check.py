# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter.mig_resources_check import FilterModule, mig_resources_check

GPUS = [{"index": i, "model": "a100_80gb", "mig_capable": True, "mig_mode_current": False, "instances": []}
        for i in range(2)]
PLUGIN = {"default": "default", "configs": {
    "default": {"version": "v1", "flags": {"migStrategy": "none"}},
    "shared": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
        "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}}}


def seen(alloc, config="shared"):
    """The resources of a kubernetes.core.k8s_info lookup of the node by name."""
    return [{"metadata": {"name": "dgx-a100-01", "labels": {"nvidia.com/device-plugin.config": config}},
             "status": {"allocatable": alloc}}]


def test_the_filter_takes_k8s_info_resources_and_the_plugin_configs():
    check = mig_resources_check(seen({"nvidia.com/gpu.shared": "8", "nvidia.com/gpu": "0"}), GPUS, PLUGIN)
    assert check["met"] and check["expected"] == {"nvidia.com/gpu.shared": "8"}
    check = mig_resources_check(seen({"nvidia.com/gpu": "2"}), GPUS, PLUGIN)
    assert not check["met"]
    assert "expected nvidia.com/gpu.shared=8" in check["message"] and "advertises nvidia.com/gpu=2" in check["message"]
    # no device plugin of the collection: the mixed strategy without sharing
    assert mig_resources_check(seen({"nvidia.com/gpu": "2"}), GPUS)["met"]
    assert FilterModule().filters()["mig_resources_check"] is mig_resources_check


def test_the_filter_reports_bad_input_as_a_filter_error():
    bad = {"default": "x", "configs": {"x": {"version": "v1", "flags": {"migStrategy": "weird"}}}}
    with pytest.raises(AnsibleFilterError, match="mig_resources_check: .*migStrategy"):
        mig_resources_check(seen({}, "x"), GPUS, bad)
