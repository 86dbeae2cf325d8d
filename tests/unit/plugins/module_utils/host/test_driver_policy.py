# -*- coding: utf-8 -*-
"""driver_policy: GPUs and NVSwitches from PCI ids, minimum driver per model, open modules, Fabric Manager."""

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.host.driver_policy import driver_plan, parse_pci_listing
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def listing(*devices):
    return "\n".join("/sys/bus/pci/devices/0000:%02x:00.0 %s %s %s" % (i, v, d, c)
                     for i, (v, d, c) in enumerate(devices))


HGX_H100 = listing(*([("0x10de", "0x2330", "0x030200")] * 8 + [("0x10de", "0x22a3", "0x068000")] * 4
                     + [("0x8086", "0x1572", "0x020000")]))


def test_parse_pci_listing_skips_garbage():
    devs = parse_pci_listing(HGX_H100 + "\nnot a device\n0000:ff:00.0 0xzz 0x1 0x2")
    assert len(devs) == 13 and devs[0] == {"bus_id": "0000:00:00.0", "vendor": 0x10DE, "device": 0x2330,
                                           "class": 0x030200}


def test_parse_pci_listing_takes_a_list_of_lines():
    lines = HGX_H100.splitlines()
    assert parse_pci_listing(lines) == parse_pci_listing(HGX_H100)
    assert driver_plan(lines, "550")["models"] == ["h100_80gb"]


def test_hgx_h100_needs_fabric_manager():
    plan = driver_plan(HGX_H100, "550")
    assert plan["models"] == ["h100_80gb"] and len(plan["gpus"]) == 8 and len(plan["nvswitches"]) == 4
    assert plan["fabric_manager"] and plan["kernel_modules"] == "proprietary"
    assert plan["min_driver"] == "525.85.12"
    assert driver_plan(HGX_H100, "550", fabric_manager=False)["fabric_manager"] is False


def test_pcie_cards_need_no_fabric_manager():
    plan = driver_plan(listing(("0x10de", "0x2331", "0x030200"), ("0x10de", "0x26b9", "0x030000")), "550")
    assert plan["models"] == ["h100_80gb", "l40s_48gb"] and not plan["fabric_manager"]


def test_eight_sxm_gpus_without_visible_switches():
    plan = driver_plan(listing(*[("0x10de", "0x20b2", "0x030200")] * 8), "535")
    assert plan["fabric_manager"] and plan["nvswitches"] == []


@pytest.mark.parametrize("models, branch, version, needed", [
    (["h200_141gb"], "535", None, "550.90.07"),
    (["b200_180gb"], "560", None, "570.133.20"),
    (["h200_141gb"], "550", "550.54.15", "550.90.07"),
])
def test_branch_too_old(models, branch, version, needed):
    with pytest.raises(GpuOpsError) as e:
        driver_plan("", branch, version=version, models=models)
    assert "too old" in e.value.msg and needed in e.value.msg


def test_branch_new_enough_and_exact_version():
    assert driver_plan("", "550", models=["h200_141gb"])["min_driver"] == "550.90.07"
    assert driver_plan("", "", version="550.127.08", models=["h200_141gb"])["branch"] == "550"
    with pytest.raises(GpuOpsError) as e:
        driver_plan("", "570", version="550.127.08")
    assert "not on branch 570" in e.value.msg


def test_open_modules_required_and_auto():
    with pytest.raises(GpuOpsError) as e:
        driver_plan(listing(("0x10de", "0x2901", "0x030200")), "570", kernel_modules="proprietary")
    assert "B200" in e.value.msg or "b200_180gb" in e.value.msg
    assert driver_plan("", "570", models=["gh200_96gb"])["kernel_modules"] == "open"
    assert driver_plan("", "550", models=["h100_80gb"])["kernel_modules"] == "proprietary"
    assert driver_plan("", "570", models=["h100_80gb"])["kernel_modules"] == "open"
    assert driver_plan("", "550", kernel_modules="open")["kernel_modules"] == "open"


@pytest.mark.parametrize("kwargs, words", [
    ({"branch": "55"}, "three-digit branch"),
    ({"branch": "550", "kernel_modules": "closed"}, "kernel_modules must be one of"),
    ({"branch": "550", "models": ["x100"]}, "unknown GPU model"),
])
def test_bad_input(kwargs, words):
    with pytest.raises(GpuOpsError) as e:
        driver_plan("", **kwargs)
    assert words in e.value.msg


def test_unknown_nvidia_gpu_reported():
    plan = driver_plan(listing(("0x10de", "0x9999", "0x030200")), "550")
    assert plan["unknown_gpus"] == ["0x9999"] and plan["models"] == []
