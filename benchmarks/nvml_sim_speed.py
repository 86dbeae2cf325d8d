# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the NVML simulator: one gpu_info (open NVML, read every GPU, close) on 8-GPU hosts.

Prints a table: host, instances, NVML calls per gpu_info, median and best wall time over N runs.
Run: .venv/bin/python benchmarks/nvml_sim_speed.py [runs]
"""

import os
import statistics
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(TOP, ".build", "collections"))
_link = os.path.join(TOP, ".build", "collections", "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link), exist_ok=True)
    os.symlink(TOP, _link)

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import open_nvml  # noqa: E402


def build(path, model, layout):
    nvml_sim.save_state(path, nvml_sim.new_state([{"model": model, "count": 8}], seed=1))
    with open_nvml(path) as nv:
        for i in range(8):
            if layout is None:
                continue
            mig_changes.set_mig_mode(nv, i, True)
            if not gpu_state.read_gpu(nv, i)["mig_mode_current"]:
                mig_changes.reset_gpu(nv, i)
            for profile, start, cis in layout:
                mig_changes.create_instance(nv, i, profile, start, cis)


class Counting(object):
    def __init__(self, backend):
        self._b = backend
        self.calls = 0

    def __getattr__(self, name):
        attr = getattr(self._b, name)
        if callable(attr) and name.startswith("nvml"):
            def wrapped(*a, **kw):
                self.calls += 1
                return attr(*a, **kw)
            return wrapped
        return attr


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    cases = [
        ("8x A100 80GB, MIG off", "a100_80gb", None),
        ("8x A100 80GB, 7x 1g.10gb", "a100_80gb", [("1g.10gb", s, None) for s in range(7)]),
        ("8x H100 80GB, 3g.40gb as 3x1c + 4g.40gb", "h100_80gb", [("4g.40gb", 0, None), ("3g.40gb", 4, [1, 1, 1])]),
        ("8x H200 141GB, 7x 1g.18gb", "h200_141gb", [("1g.18gb", s, None) for s in range(7)]),
        ("8x L40S (no MIG)", "l40s_48gb", None),
    ]
    tmp = tempfile.mkdtemp()
    print("%-44s %9s %11s %10s %10s" % ("host", "instances", "NVML calls", "median ms", "best ms"))
    for title, model, layout in cases:
        path = os.path.join(tmp, model + ".json")
        build(path, model, layout)
        times = []
        for dummy in range(runs):
            t = time.perf_counter()
            info = gpu_state.gpu_info(path, diagram=False)
            times.append((time.perf_counter() - t) * 1000)
        with open_nvml(path) as nv:
            counting = Counting(nv)
            gpu_state.read_host(counting)
        n = sum(len(g["instances"]) for g in info["gpus"])
        print("%-44s %9d %11d %10.2f %10.2f" % (title, n, counting.calls, statistics.median(times), min(times)))


if __name__ == "__main__":
    main()
