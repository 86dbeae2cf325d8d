# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter import dra_resource_slices as rs_filter
from ansible_collections.gpuops.k8s.plugins.filter import dra_steering_rules as steer_filter

HOST = {"driver_version": "580.95.05", "cuda_driver_version": "13.0", "gpus": [
    {"index": 0, "model": "h100_80gb", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-a", "memory_total_mib": 81559,
     "mig_mode_current": True, "instances": []}]}


def test_filters_are_registered_and_work():
    assert rs_filter.FilterModule().filters()["dra_resource_slices"] is rs_filter.dra_resource_slices
    assert steer_filter.FilterModule().filters()["dra_steering_rules"] is steer_filter.dra_steering_rules
    slices = rs_filter.dra_resource_slices(HOST, node="n1", dynamic=True)
    assert [bool(s["spec"].get("sharedCounters")) for s in slices] == [True, False]
    static = rs_filter.dra_resource_slices(HOST, node="n1", dynamic=False)
    assert len(static) == 1 and "sharedCounters" not in static[0]["spec"]
    rules = steer_filter.dra_steering_rules(slices, {"0": [{"profile": "7g.80gb", "start": 0}]})
    assert len(rules) == 25 and all(r["spec"]["taint"]["effect"] == "NoSchedule" for r in rules)


def test_filters_fail_with_the_reason():
    with pytest.raises(AnsibleFilterError, match="dra_resource_slices: .*not a valid Kubernetes node name"):
        rs_filter.dra_resource_slices(HOST, node="N 1")
    slices = rs_filter.dra_resource_slices(HOST, node="n1")
    with pytest.raises(AnsibleFilterError, match="dra_steering_rules: .*7g.80gb at start 4 is no device"):
        steer_filter.dra_steering_rules(slices, {"0": [{"profile": "7g.80gb", "start": 4}]})
