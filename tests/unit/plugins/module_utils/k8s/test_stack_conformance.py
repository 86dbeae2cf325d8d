# -*- coding: utf-8 -*-
"""Issue 16 items 7-10: the device plugin and dcgm-exporter formats as the pinned upstream versions read them."""
import os

import pytest
import yaml

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import validate as gv
from ansible_collections.gpuops.k8s.plugins.module_utils.metrics import dcgm
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


def _mps(**extra):
    rep = {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    rep.update(extra)
    return {"version": "v1", "sharing": {"mps": rep}}


# ---------------------------------------------------------------- item 7


def test_mps_fail_requests_greater_than_one_false_is_accepted_and_kept():
    """Device plugin v0.20.0 honours false (it defaults to true only when the field is absent)."""
    plan = device_plugin.validate_device_plugin({"m": _mps(failRequestsGreaterThanOne=False)}, "m")
    assert plan["configs"]["m"]["sharing"]["mps"]["failRequestsGreaterThanOne"] is False
    assert plan["summary"]["m"]["sharing"] == "mps"


def test_mps_fail_requests_greater_than_one_must_still_be_a_bool():
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"m": _mps(failRequestsGreaterThanOne="no")}, "m")
    assert "must be true or false" in e.value.msg


# ---------------------------------------------------------------- item 8


@pytest.mark.parametrize("value, want", [
    ("envvar,cdi-cri", ["envvar", "cdi-cri"]),
    (" envvar , volume-mounts ", ["envvar", "volume-mounts"]),
    ("cdi-cri", "cdi-cri"),
    (["envvar", "cdi-annotations"], ["envvar", "cdi-annotations"]),
])
def test_device_list_strategy_comma_string_is_written_as_a_list(value, want):
    """The plugin reads a string as ONE strategy ("envvar,cdi-cri" fails at start): write a YAML list."""
    plan = device_plugin.validate_device_plugin({"d": {"flags": {"plugin": {"deviceListStrategy": value}}}}, "d")
    got = plan["configs"]["d"]["flags"]["plugin"]["deviceListStrategy"]
    assert got == want
    # what the ConfigMap holds reads back the same way
    assert yaml.safe_load(yaml.safe_dump(plan["configs"]["d"]))["flags"]["plugin"]["deviceListStrategy"] == want


@pytest.mark.parametrize("value", ["", [], "envvar,", ["envvar", "envvar"], [1]])
def test_device_list_strategy_bad_values_are_refused(value):
    with pytest.raises(GpuOpsError) as e:
        device_plugin.validate_device_plugin({"d": {"flags": {"plugin": {"deviceListStrategy": value}}}}, "d")
    assert "deviceListStrategy" in e.value.msg


# ---------------------------------------------------------------- item 9


def test_pcie_bytes_are_gauges_in_the_role_defaults():
    with open(os.path.join(TOP, "roles", "dcgm_exporter", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    types = dict((m["field"], m["type"]) for m in defaults["dcgm_exporter_metrics"])
    assert types["DCGM_FI_PROF_PCIE_TX_BYTES"] == "gauge" and types["DCGM_FI_PROF_PCIE_RX_BYTES"] == "gauge"
    csv = dcgm.validate_dcgm_metrics(defaults["dcgm_exporter_metrics"])
    assert "DCGM_FI_PROF_PCIE_TX_BYTES, gauge," in csv


@pytest.mark.parametrize("field", ["DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES",
                                   "DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
def test_profiling_fields_as_counters_are_refused(field):
    with pytest.raises(GpuOpsError) as e:
        dcgm.validate_dcgm_metrics([{"field": field, "type": "counter", "help": "x"}])
    assert field in e.value.msg and "gauge" in e.value.msg


# ---------------------------------------------------------------- item 10


@pytest.mark.parametrize("value", ["f", "g", "i", "g:0", "g:0,2-4", "i:1-3", "i:0,5"])
def test_dcgm_devices_valid_values(value):
    assert dcgm.validate_dcgm_devices(value) == value


@pytest.mark.parametrize("value", ["g+i", "f:0", "x", "g:", "g:a", "g:1-2-3", "i:0,", "", "g:-1", "G"])
def test_dcgm_devices_invalid_values(value):
    with pytest.raises(GpuOpsError) as e:
        dcgm.validate_dcgm_devices(value)
    assert "DCGM_EXPORTER_DEVICES_STR" in e.value.msg and "g[:range]" in e.value.msg


def test_dcgm_component_validates_devices():
    result, dummy = gv.run_validate({"component": "dcgm_exporter", "devices": "g:0-3",
                                     "metrics": [{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "t"}]})
    assert result["devices"] == "g:0-3"
    with pytest.raises(GpuOpsError):
        gv.run_validate({"component": "dcgm_exporter", "devices": "g+i",
                         "metrics": [{"field": "DCGM_FI_DEV_GPU_TEMP", "type": "gauge", "help": "t"}]})


def test_no_g_plus_i_left_in_the_role():
    for rel in ("defaults/main.yml", "meta/argument_specs.yml", "README.md"):
        path = os.path.join(TOP, "roles", "dcgm_exporter", rel)
        if os.path.exists(path):
            with open(path) as f:
                assert "g+i" not in f.read(), rel
