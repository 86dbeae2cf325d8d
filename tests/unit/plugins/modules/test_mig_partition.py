# -*- coding: utf-8 -*-
"""The mig_partition module: argument spec, check mode and failure translation through AnsibleModule."""
import json

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.modules import mig_partition

import module_harness
from module_harness import Exit, Fail


@pytest.fixture
def sim(tmp_path):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": 2}], seed=5)
    for g in state["gpus"]:
        g["mig_mode_current"] = g["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def call(args, exc):
    return module_harness.call(mig_partition, args, expect=exc)


LAYOUT = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]


def test_apply_then_idempotent(sim):
    r = call({"simulator": sim, "layout": LAYOUT}, Exit)
    assert r["changed"] and r["resources"] == {"nvidia.com/mig-3g.40gb": 4}
    r = call({"simulator": sim, "layout": LAYOUT}, Exit)
    assert not r["changed"]


def test_check_mode_writes_nothing(sim):
    before = open(sim).read()
    r = call({"simulator": sim, "layout": LAYOUT, "_ansible_check_mode": True, "_ansible_diff": True}, Exit)
    assert r["changed"] and "diff" in r and open(sim).read() == before


def test_simulator_from_environment(sim, monkeypatch):
    monkeypatch.setenv("GPUOPS_NVML_SIMULATOR", sim)
    r = call({"layout": LAYOUT}, Exit)
    assert r["changed"]


def test_error_details_reach_fail_json(sim):
    r = call({"simulator": sim, "layout": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 1}}]},
             Fail)
    assert "valid profiles" in r["msg"] and r["valid_profiles"][0] == "1g.10gb"
    json.dumps(r)


@pytest.mark.parametrize("args,words", [
    ({"layout": LAYOUT, "config_file": "/x.yaml"}, "mutually exclusive"),
    ({}, "one of the following is required"),
    ({"layout": LAYOUT, "config": "all-1g.10gb"}, "config_file"),
])
def test_argument_spec(sim, args, words):
    args = dict(args, simulator=sim)
    r = call(args, Fail)
    assert words in r["msg"]
