# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driver policy for GPU hosts: which GPUs a host has (from PCI ids), the oldest driver branch they
need, whether they need NVIDIA's open kernel modules, and whether the host needs Fabric Manager.

Used by the ``nvidia_driver`` role (through the ``gpuops.k8s.nvidia_driver_plan`` filter) to refuse a
bad combination BEFORE anything is installed. Pure Python, no NVML, Python 3.9 compatible.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

# PCI class codes (24 bit) of NVIDIA functions.
PCI_CLASS_VGA = 0x030000
PCI_CLASS_3D = 0x030200
PCI_CLASS_BRIDGE_OTHER = 0x068000  # NVSwitch chips enumerate as "Bridge: NVIDIA Corporation"

# NVSwitch device ids seen on HGX/DGX baseboards (any NVIDIA bridge-class function counts).
NVSWITCH_IDS = {
    0x1AF1: "NVSwitch gen2 (HGX/DGX A100)",
    0x22A3: "NVSwitch gen3 (HGX/DGX H100/H200)",
}

# Models whose GPUs only work with the open kernel modules (proprietary modules refuse them).
OPEN_ONLY_ARCHITECTURES = (gpu_catalog.ARCH_BLACKWELL,)
OPEN_ONLY_MODELS = ("gh200_96gb", "gh200_144gb")

# Oldest branch per model where the catalog has no MIG minimum (first branch with support).
MIN_DRIVER_FALLBACK = {
    "gh200_96gb": "535.86.10",
    "gh200_144gb": "550.54.14",
    "l40s_48gb": "525.85.12",
    "l4_24gb": "525.60.13",
}

KERNEL_MODULE_FLAVOURS = ("open", "proprietary", "auto")


def _int(text):
    text = str(text).strip().lower()
    return int(text, 16) if text.startswith("0x") else int(text, 16 if re.match(r"^[0-9a-f]+$", text) else 10)


def parse_pci_listing(text: Any) -> List[Dict[str, Any]]:
    """Parse lines ``<bus id> <vendor> <device> <class>`` (values as in /sys/bus/pci/devices/*/), given
    as one text or as a list of lines.

    Returns ``[{"bus_id", "vendor", "device", "class"}]`` (ints for the ids); other lines are skipped.
    """
    out = []
    lines = text if isinstance(text, (list, tuple)) else (text or "").splitlines()
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        bus = parts[0].rsplit("/", 1)[-1]
        try:
            out.append({"bus_id": bus, "vendor": _int(parts[1]), "device": _int(parts[2]),
                        "class": _int(parts[3])})
        except ValueError:
            continue
    return out


def _branch_of(version):
    return gpu_catalog.version_tuple(version)[0] if version else None


def min_driver(model: Any) -> Optional[str]:
    return model.min_driver or MIN_DRIVER_FALLBACK.get(model.key)


def needs_open_modules(model: Any) -> bool:
    return model.architecture in OPEN_ONLY_ARCHITECTURES or model.key in OPEN_ONLY_MODELS


def driver_plan(pci_devices: Any, branch: str, version: Optional[str] = None, kernel_modules: str = "auto",
                models: Optional[List[str]] = None, fabric_manager: Any = "auto") -> Dict[str, Any]:
    """Decide and validate the driver for a host.

    ``pci_devices``: output of parse_pci_listing (or its text, or its lines); ``branch``: e.g. "550";
    ``version``: an exact version pin or None; ``kernel_modules``: open/proprietary/auto;
    ``models``: catalog keys to assume instead of (or in addition to) what PCI shows (for hosts
    prepared before their GPUs are visible); ``fabric_manager``: true/false/"auto".

    Returns a dict (gpus, models, nvswitches, min_driver, kernel_modules, fabric_manager, reasons).
    Raises GpuOpsError naming what would work when the branch is too old for a model or the
    proprietary modules are asked for a model that needs the open ones.
    """
    if isinstance(pci_devices, str) or (pci_devices and isinstance(pci_devices[0], str)):
        pci_devices = parse_pci_listing(pci_devices)
    if kernel_modules not in KERNEL_MODULE_FLAVOURS:
        raise GpuOpsError("kernel_modules must be one of %s, got %r" % (", ".join(KERNEL_MODULE_FLAVOURS),
                                                                        kernel_modules))
    branch = str(branch or "").strip()
    if version:
        version = str(version).strip()
        if branch and str(_branch_of(version)) != branch:
            raise GpuOpsError("driver version %s is not on branch %s" % (version, branch))
        branch = branch or str(_branch_of(version))
    if not re.match(r"^\d{3}$", branch):
        raise GpuOpsError("driver branch must be a three-digit branch such as 550 or 570, got %r" % branch)

    gpus, nvswitches, unknown = [], [], []
    for dev in pci_devices or []:
        if dev.get("vendor") != gpu_catalog.NVIDIA_VENDOR_ID:
            continue
        cls = dev.get("class", 0) & 0xFFFF00
        if cls in (PCI_CLASS_VGA, PCI_CLASS_3D):
            model = gpu_catalog.lookup_model(dev["device"])
            variant = None
            if model is not None:
                variant = [v for v in model.variants if v.pci_device_id == dev["device"]][0]
            gpus.append({"bus_id": dev.get("bus_id"), "pci_device_id": "0x%04x" % dev["device"],
                         "model": model.key if model else None,
                         "board": variant.board if variant else None})
            if model is None:
                unknown.append("0x%04x" % dev["device"])
        elif cls == PCI_CLASS_BRIDGE_OTHER:
            nvswitches.append({"bus_id": dev.get("bus_id"), "pci_device_id": "0x%04x" % dev["device"],
                               "name": NVSWITCH_IDS.get(dev["device"], "NVSwitch")})

    keys = sorted(set([g["model"] for g in gpus if g["model"]] + list(models or [])))
    resolved = [gpu_catalog.find_model(k) for k in keys]
    reasons = []

    # Oldest driver every model accepts.
    floor, floor_model = None, None  # type: Any, Any
    for m in resolved:
        need = min_driver(m)
        if need and (floor is None or gpu_catalog.version_tuple(need) > gpu_catalog.version_tuple(floor)):
            floor, floor_model = need, m
    if floor:
        floor_branch = int(_branch_of(floor) or 0)
        too_old = (gpu_catalog.version_tuple(version) < gpu_catalog.version_tuple(floor) if version
                   else int(branch) < floor_branch)
        if too_old:
            raise GpuOpsError(
                "driver %s is too old for %s: it needs %s or newer (branch %d or later); choose "
                "nvidia_driver_branch >= %d" % (version or "branch " + branch, floor_model.marketing_name,
                                                floor, floor_branch, floor_branch),
                min_driver=floor, models=keys)
        reasons.append("%s needs driver >= %s" % (floor_model.marketing_name, floor))

    open_needed = [m.key for m in resolved if needs_open_modules(m)]
    if open_needed and kernel_modules == "proprietary":
        raise GpuOpsError(
            "%s only work with NVIDIA's open kernel modules; set nvidia_driver_kernel_modules to open "
            "(or auto)" % ", ".join(open_needed), models=open_needed)
    if kernel_modules == "auto":
        # NVIDIA recommends the open modules from Turing on and defaults to them from 560.
        flavour = "open" if open_needed or int(branch) >= 560 else "proprietary"
        reasons.append("kernel modules: %s (%s)" % (
            flavour, "required by " + ", ".join(open_needed) if open_needed else
            "default for branch %s" % branch))
    else:
        flavour = kernel_modules

    sxm = [g for g in gpus if g["board"] and ("SXM" in g["board"] or g["model"] == "b200_180gb")]
    if fabric_manager in (True, False):
        fm = fabric_manager
    elif str(fabric_manager).lower() in ("true", "yes"):
        fm = True
    elif str(fabric_manager).lower() in ("false", "no"):
        fm = False
    else:
        fm = bool(nvswitches) or len(sxm) >= 8
        if fm:
            why = ("%d NVSwitch(es) found" % len(nvswitches) if nvswitches
                   else "%d SXM GPUs on one baseboard" % len(sxm))
            reasons.append("Fabric Manager: %s" % why)
    return {
        "branch": branch,
        "version": version or None,
        "gpus": gpus,
        "unknown_gpus": unknown,
        "models": keys,
        "nvswitches": nvswitches,
        "min_driver": floor,
        "kernel_modules": flavour,
        "fabric_manager": fm,
        "reasons": reasons,
    }
