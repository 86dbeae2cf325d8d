# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-only capture of a real GPU host through the collection's NVML layer (RealBackend).

Usage: python3 hack/device/nvml_capture.py OUT_DIR [PYNVML_DIR]

Writes OUT_DIR/nvml-capture.json: for every GPU its identity and MIG mode, and per GPU-instance
profile constant the raw v2 profile info (id, name, slices, instance count, memory, SMs) and the
possible placements, each call's NVML error where it fails; the existing GPU instances; and
gpu_state.read_host() / live_profiles() as the gpu_info module computes them. Plus nvidia-smi's
own listings (nvidia-smi, mig -lgip/-lgipp) as text for comparison.

Only NVML *read* calls are made: no MIG mode change, no instance created or destroyed, no reset,
no clock or power setting. tests/unit/.../test_hardware_capture.py compares a committed capture
with the GPU catalog (plugins/module_utils/catalog/gpus.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _collection_path():
    """A temporary ansible_collections/gpuops/k8s that points at this checkout."""
    base = tempfile.mkdtemp(prefix="gpuops-capture-")
    os.makedirs(os.path.join(base, "ansible_collections", "gpuops"))
    os.symlink(ROOT, os.path.join(base, "ansible_collections", "gpuops", "k8s"))
    for d in ("ansible_collections", os.path.join("ansible_collections", "gpuops")):
        open(os.path.join(base, d, "__init__.py"), "w").close()
    return base


def setup(argv):
    """OUT_DIR from the command line; nvidia-ml-py's directory (optional second argument) and this
    checkout as the gpuops.k8s collection on sys.path."""
    out_dir = argv[1] if len(argv) > 1 else "."
    if len(argv) > 2:
        sys.path.insert(0, argv[2])
    sys.path.insert(0, _collection_path())
    return out_dir


def _run(cmd):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60,
                           check=False)
        return {"cmd": " ".join(cmd), "rc": p.returncode, "output": p.stdout}
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"cmd": " ".join(cmd), "error": str(e)}


def _err(e):
    return {"error": type(e).__name__, "value": getattr(e, "value", None), "text": str(e)}


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def _struct(info):
    out = {}
    names = [f[0] for f in getattr(info, "_fields_", ())] or sorted(vars(info))  # pynvml struct or simulator object
    for name in names:
        v = getattr(info, name)
        if isinstance(v, (bytes, str)):
            v = _text(v)
        elif not isinstance(v, (int, float)):
            continue
        out[name] = v
    return out


def capture(nvml, gpu_state, catalog):
    out = {"driver_version": None, "cuda_driver_version": None, "nvml_version": None, "gpus": []}
    for key, call in (("driver_version", "nvmlSystemGetDriverVersion"), ("nvml_version", "nvmlSystemGetNVMLVersion"),
                      ("cuda_driver_version", "nvmlSystemGetCudaDriverVersion")):
        try:
            out[key] = _text(getattr(nvml, call)())
        except Exception as e:  # pylint: disable=broad-except
            out[key] = _err(e)
    count = nvml.nvmlDeviceGetCount()
    for index in range(count):
        gpu = {"index": index}
        h = nvml.nvmlDeviceGetHandleByIndex(index)
        pci = nvml.nvmlDeviceGetPciInfo(h)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        gpu.update(name=_text(nvml.nvmlDeviceGetName(h)), pci_device_id="0x%04X" % ((int(pci.pciDeviceId) >> 16) & 0xFFFF),
                   pci_sub_system_id="0x%08X" % int(pci.pciSubSystemId), memory_total_bytes=int(mem.total),
                   memory_total_mib=int(mem.total) // (1024 * 1024))
        for key, call in (("mig_mode", "nvmlDeviceGetMigMode"), ("max_mig_device_count", "nvmlDeviceGetMaxMigDeviceCount"),
                          ("multiprocessor_count", "nvmlDeviceGetNumGpuCores")):
            try:
                gpu[key] = getattr(nvml, call)(h)
            except Exception as e:  # pylint: disable=broad-except
                gpu[key] = _err(e)
        profiles = []
        for const in range(catalog.GI_PROFILE_COUNT):
            row = {"constant": const}
            for version in (2, 1):
                try:
                    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(h, const, version)
                    row["info_v%d" % version] = _struct(info)
                except Exception as e:  # pylint: disable=broad-except
                    row["info_v%d" % version] = _err(e)
            info = row.get("info_v2") if "id" in row.get("info_v2", {}) else row.get("info_v1")
            if info and "id" in info:
                try:
                    row["placements"] = [[p.start, p.size] for p in
                                         nvml.nvmlDeviceGetGpuInstancePossiblePlacements(h, info["id"])]
                except Exception as e:  # pylint: disable=broad-except
                    row["placements"] = _err(e)
                try:
                    row["remaining_capacity"] = nvml.nvmlDeviceGetGpuInstanceRemainingCapacity(h, info["id"])
                except Exception as e:  # pylint: disable=broad-except
                    row["remaining_capacity"] = _err(e)
                try:
                    row["existing_instances"] = len(nvml.nvmlDeviceGetGpuInstances(h, info["id"]))
                except Exception as e:  # pylint: disable=broad-except
                    row["existing_instances"] = _err(e)
            profiles.append(row)
        gpu["gi_profiles"] = profiles
        try:
            gpu["live_profiles"] = [p._asdict() for p in gpu_state.live_profiles(nvml, index)]
        except Exception as e:  # pylint: disable=broad-except
            gpu["live_profiles"] = _err(e)
        model = catalog.lookup_model(int(gpu["pci_device_id"], 16)) or catalog.lookup_model(gpu["name"])
        gpu["catalog_model"] = model.key if model is not None else None
        out["gpus"].append(gpu)
    try:
        out["read_host"] = gpu_state.read_host(nvml)
    except Exception as e:  # pylint: disable=broad-except
        out["read_host"] = _err(e)
        out["read_host"]["traceback"] = traceback.format_exc()
    return out


def main(argv):
    out_dir = setup(argv)
    from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import open_nvml

    result = {"captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tool": "hack/device/nvml_capture.py",
              "nvidia_smi": [_run(c) for c in (["nvidia-smi"], ["nvidia-smi", "mig", "-lgip"], ["nvidia-smi", "mig", "-lgipp"],
                                               ["nvidia-smi", "mig", "-lgi"],
                                               ["nvidia-smi", "--query-gpu=name,pci.device_id,memory.total,mig.mode.current,"
                                                "mig.mode.pending,driver_version", "--format=csv"])]}
    t0 = time.time()
    try:
        with open_nvml(None) as nvml:
            result["nvml"] = capture(nvml, gpu_state, gpu_catalog)
    except Exception as e:  # pylint: disable=broad-except
        result["nvml"] = _err(e)
        result["nvml"]["traceback"] = traceback.format_exc()
    result["capture_seconds"] = round(time.time() - t0, 3)
    try:
        result["gpu_info"] = gpu_state.gpu_info(None, diagram=True)
    except Exception as e:  # pylint: disable=broad-except
        result["gpu_info"] = _err(e)
        result["gpu_info"]["traceback"] = traceback.format_exc()
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "nvml-capture.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True, default=str)
    print("wrote %s (%.2f s of NVML reads)" % (path, result["capture_seconds"]))
    for g in result["nvml"].get("gpus", []) if isinstance(result["nvml"], dict) else []:
        print("GPU %d %s %s %d MiB mig=%s model=%s" % (g["index"], g["name"], g["pci_device_id"], g["memory_total_mib"],
                                                       g.get("mig_mode"), g.get("catalog_model")))
        for row in g["gi_profiles"]:
            i = row.get("info_v2", {})
            if "id" in i:
                print("   const %2d id %2d %-18s slices %d inst %d mem %6d MiB sm %s placements %s"
                      % (row["constant"], i["id"], i.get("name"), i["sliceCount"], i["instanceCount"], i["memorySizeMB"],
                         i.get("multiprocessorCount"), row.get("placements")))
    gi = result.get("gpu_info")
    if isinstance(gi, dict) and "diagram" in gi:
        print("\n".join(gi["diagram"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
