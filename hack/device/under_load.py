# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_info's process and utilisation facts on a real GPU while a CUDA workload runs (read-only).

Usage: python3 hack/device/under_load.py OUT_DIR [PYNVML_DIR]

Starts a short matrix-multiply loop with PyTorch (when importable; the GPU's settings are not
touched), reads gpu_state.read_host() through the real backend a few times while it runs and once
after it ended, and writes OUT_DIR/under-load.json: per reading the processes (pid, name, memory),
utilisation and power the facts show, and the workload's own pid for comparison.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nvml_capture import setup  # noqa: E402  pylint: disable=wrong-import-position

LOAD = """
import time, torch
a = torch.randn(8192, 8192, device="cuda"); b = torch.randn(8192, 8192, device="cuda")
print("ready", flush=True)
end = time.time() + float(__import__("sys").argv[1])
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
"""


def _reading(gpu_state, open_nvml, t0):
    with open_nvml(None) as nvml:
        t = time.time()
        host = gpu_state.read_host(nvml)
        took = time.time() - t
    g = host["gpus"][0]
    return {"at_s": round(time.time() - t0, 2), "read_s": round(took, 3), "processes": g.get("processes"),
            "utilization_gpu_pct": g.get("utilization_gpu_pct"), "power_w": g.get("power_w"),
            "temperature_c": g.get("temperature_c")}


def main(argv):
    out_dir = setup(argv)
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import open_nvml

    t0 = time.time()
    result = {"idle": _reading(gpu_state, open_nvml, t0), "loaded": []}
    load = subprocess.Popen([sys.executable, "-c", LOAD, "12"], stdout=subprocess.PIPE, universal_newlines=True)
    result["workload"] = {"pid": load.pid, "python": sys.executable, "ready": load.stdout.readline().strip()}
    time.sleep(2)
    for dummy in range(4):
        result["loaded"].append(_reading(gpu_state, open_nvml, t0))
        time.sleep(1.5)
    load.wait(timeout=60)
    result["workload"]["rc"] = load.returncode
    time.sleep(1)
    result["after"] = _reading(gpu_state, open_nvml, t0)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "under-load.json"), "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
