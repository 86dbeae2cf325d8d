# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_partition in check mode and the health check against a real GPU host, changing nothing.

Usage: python3 hack/device/check_mode_plans.py OUT_DIR [PYNVML_DIR]

The real NVML backend is wrapped in a guard that lets through only reads (nvml*Get*, nvmlInit,
nvmlShutdown) and refuses every other call before it reaches the driver, so a check-mode bug
would show up as a refused call in the report, never as a changed GPU. For each layout below the
module's own runner (mig.engine.run_mig_partition, check_mode=True, diff=True) plans against the
real GPU; the same plan is then computed on a simulated host of the same model and driver, and both
are written to OUT_DIR/check-mode-plans.json (compared by tests/unit/.../test_hardware_capture.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from nvml_capture import _err, setup  # noqa: E402  pylint: disable=wrong-import-position

READ_PREFIXES = ("nvmlDeviceGet", "nvmlSystemGet", "nvmlGpuInstanceGet", "nvmlComputeInstanceGet", "nvmlInit",
                 "nvmlShutdown", "nvmlErrorString")
CONFIG = os.path.join(os.path.dirname(HERE), "..", "tests", "integration", "targets", "mig_partition", "files",
                      "default-mig-parted-config.yaml")

LAYOUTS = {
    "all-balanced (GPU Operator default config)": {"config_file": CONFIG, "config": "all-balanced"},
    "inline 3g.71gb + 2g.35gb + 2x 1g.18gb": {"layout": [{"devices": "all", "mig-enabled": True,
                                                         "mig-devices": {"3g.71gb": 1, "2g.35gb": 1, "1g.18gb": 2}}]},
    "all-disabled": {"config_file": CONFIG, "config": "all-disabled"},
    "bad profile 5g.50gb": {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": {"5g.50gb": 1}}]},
    "too much: 3x 3g.71gb": {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.71gb": 3}}]},
}


class ReadOnly(object):
    """Forwards NVML reads to the real backend; refuses (and records) anything else."""

    kind = "nvml"

    def __init__(self, backend):
        self._backend = backend
        self.refused = []
        self.calls = 0

    @property
    def cache(self):
        return self._backend.cache

    def __getattr__(self, name):
        target = getattr(self._backend, name)
        if name.startswith("nvml") and not name.startswith(READ_PREFIXES):
            def refuse(*args, **kwargs):
                self.refused.append(name)
                raise RuntimeError("read-only guard: %s refused" % name)
            return refuse
        if name in ("reset_gpu", "lock_file"):
            def refuse_other(*args, **kwargs):
                self.refused.append(name)
                raise RuntimeError("read-only guard: %s refused" % name)
            return refuse_other
        if callable(target):
            def call(*args, **kwargs):
                self.calls += 1
                return target(*args, **kwargs)
            return call
        return target


def _params(spec):
    out = {"config_file": None, "config": None, "layout": None, "force": False, "missing_gpus": None, "simulator": None}
    out.update(spec)
    return out


def _plan(nvml, spec):
    from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
    from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
    try:
        r = mig_engine.run_mig_partition(nvml, _params(spec), check_mode=True, diff=True)
        return {"changed": r.get("changed"), "actions": r.get("actions"), "resources": r.get("resources"),
                "diagram": r.get("diagram"), "warnings": r.get("warnings")}
    except GpuOpsError as e:
        return {"failed": True, "msg": e.msg}
    except Exception as e:  # pylint: disable=broad-except
        out = _err(e)
        out["traceback"] = traceback.format_exc()
        return out


def _comparable(plan):
    """A plan without what differs between two GPUs by nature (the UUID) and without timings."""
    actions = [{k: v for k, v in a.items() if k != "uuid"} for a in plan.get("actions") or []]
    return {"changed": plan.get("changed"), "actions": actions, "resources": plan.get("resources"), "msg": plan.get("msg")}


def main(argv):
    out_dir = setup(argv)
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.factory import open_nvml
    from ansible_collections.gpuops.k8s.plugins.module_utils.health import checks as health_checks
    from ansible_collections.gpuops.k8s.plugins.module_utils.sim import state as sim_state
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import writable

    result = {"captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tool": "hack/device/check_mode_plans.py",
              "real": {}, "simulated": {}}
    with open_nvml(None) as real:
        guard = ReadOnly(real)
        facts = gpu_state.read_host(guard)
        result["host"] = {"driver_version": facts["driver_version"],
                          "gpus": [{k: g.get(k) for k in ("index", "name", "model", "pci_device_id", "memory_total_mib",
                                                          "mig_mode_current", "mig_mode_pending")} for g in facts["gpus"]]}
        for title, spec in LAYOUTS.items():
            t0 = time.time()
            result["real"][title] = _plan(guard, spec)
            result["real"][title]["seconds"] = round(time.time() - t0, 3)
        t0 = time.time()
        verdict = health_checks.evaluate_host(facts, expected_gpus=len(facts["gpus"]), kernel_log="")
        result["health"] = {"verdict": verdict, "seconds": round(time.time() - t0, 3)}
        result["guard"] = {"refused": guard.refused, "read_calls": guard.calls}

    # the same plans on a simulated host of the same model, driver and MIG mode
    path = os.path.join(tempfile.mkdtemp(prefix="gpuops-sim-"), "host.json")
    gpus = [{"model": g["name"], "count": 1} for g in facts["gpus"]]
    sim = sim_state.new_state(gpus, driver_version=facts["driver_version"], seed=1)
    sim_state.save_state(path, sim)
    with writable.open_nvml(path) as nvml:
        for title, spec in LAYOUTS.items():
            result["simulated"][title] = _plan(nvml, spec)

    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "check-mode-plans.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True, default=str)
    guard = result["guard"]
    print("wrote %s; guard refused %s, %d read calls" % (out, guard["refused"] or "nothing", guard["read_calls"]))
    for title in LAYOUTS:
        r, s = result["real"][title], result["simulated"][title]
        real = ("failed: " + r["msg"][:70] if r.get("failed")
                else "changed=%s %d actions" % (r.get("changed"), len(r.get("actions") or [])))
        sim = "failed" if s.get("failed") else "changed=%s" % s.get("changed")
        same = "SAME" if _comparable(r) == _comparable(s) else "DIFFERENT"
        print("%-45s real: %s  simulated: %s  %s" % (title, real, sim, same))
        for line in r.get("diagram") or []:
            print("    " + line)
    print("health: %s" % json.dumps(result["health"]["verdict"])[:400])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
