# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layout transitions on the NVML simulator: gpuops.k8s's minimal plan vs mig-parted's flush.

For each scripted transition (one GPU, MIG mode already on, the "from" layout created first):

* ours: ``mig_engine.run_mig_partition`` with the "to" layout;
* flush: mig-parted's approach, executed on an identical copy of the GPU: when the GPU's profile
  counts differ from the target, destroy every compute instance and GPU instance, then create the
  target (largest GPU instances first, ``nvmlDeviceCreateGpuInstance`` without placement, the
  driver choosing the slot; CI profiles reuse the previous GI while it has room); the next
  ordering is tried when a creation fails, as mig-parted does.

"ideal" is the flush's call count had its first ordering worked (each CI and GI destroyed once,
each target GI and CI created once); the ratio target is checked against it, the stricter baseline.

Both run through the same recorder that counts mutating NVML calls (SetMigMode, Create/Destroy of
GPU and compute instances). "destroyed" counts GPU instances destroyed; "again" counts destroyed
instances that exist again afterwards with the same profile, compute instances and placement:
instances that stay in the target layout but were destroyed anyway (their workload killed for
nothing). mig-parted does not choose placements, so its "again" undercounts what it needlessly
destroys; the "destroyed" column shows the rest.

Finally the time of one gpu_info read (``nvmlInit`` + ``gpu_state.read_host`` + ``nvmlShutdown``,
what the module does inside Ansible) on an 8-GPU simulated host.

Run: ``make bench`` (or ``python3 benchmarks/mig_transitions.py``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
_root = os.path.join(TOP, ".build", "collections")
_link = os.path.join(_root, "ansible_collections", "gpuops", "k8s")
if not os.path.exists(_link):
    os.makedirs(os.path.dirname(_link))
    os.symlink(TOP, _link)
sys.path.insert(0, _root)

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import mig_changes  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim  # noqa: E402
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import NvmlError  # noqa: E402

MUTATING_CALLS = ("nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
                  "nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
                  "nvmlGpuInstanceDestroy", "nvmlComputeInstanceDestroy")

A100 = "a100_80gb"
H100 = "h100_80gb"
H200 = "h200_141gb"

BAL = {A100: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, H100: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
       H200: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}}

# (model, name, from mig-devices (or a list of them applied in turn), to mig-devices)
TRANSITIONS = [
    (A100, "empty -> all-1g.10gb", {}, {"1g.10gb": 7}),
    (A100, "all-1g.10gb -> all-3g.40gb", {"1g.10gb": 7}, {"3g.40gb": 2}),
    (A100, "all-balanced -> all-1g.10gb", BAL[A100], {"1g.10gb": 7}),
    (A100, "all-balanced -> 4g + 3x1g", BAL[A100], {"4g.40gb": 1, "1g.10gb": 3}),
    (A100, "add one 1g to 3g + 1x1g", {"3g.40gb": 1, "1g.10gb": 1}, {"3g.40gb": 1, "1g.10gb": 2}),
    (A100, "shrink one 3g to 2g", {"3g.40gb": 2}, {"3g.40gb": 1, "2g.20gb": 1}),
    (A100, "merge two 1g into a 2g", {"1g.10gb": 7}, {"1g.10gb": 5, "2g.20gb": 1}),
    (A100, "7g -> all-balanced", {"7g.80gb": 1}, BAL[A100]),
    (H100, "all-3g.40gb -> all-balanced", {"3g.40gb": 2}, BAL[H100]),
    (H100, "all-balanced -> 3x1c.3g + 4g", BAL[H100], {"1c.3g.40gb": 3, "4g.40gb": 1}),
    (H100, "4g + 3x1g -> 4g + 3g", {"4g.40gb": 1, "1g.10gb": 3}, {"4g.40gb": 1, "3g.40gb": 1}),
    (H100, "all-1g.20gb -> 2x1g.20gb + 3g", {"1g.20gb": 4}, {"1g.20gb": 2, "3g.40gb": 1}),
    (H100, "remove one 1g from all-1g", {"1g.10gb": 7}, {"1g.10gb": 6}),
    (H100, "no change (7g.80gb)", {"7g.80gb": 1}, {"7g.80gb": 1}),
    (H100, "split the 3g of balanced into 3x1c", BAL[H100], {"1c.3g.40gb": 3, "2g.20gb": 1, "1g.10gb": 2}),
    (H200, "all-1g.18gb -> all-3g.71gb", {"1g.18gb": 7}, {"3g.71gb": 2}),
    (H200, "balanced -> 3g swapped for 2x1g.35gb", BAL[H200], {"1g.18gb": 2, "2g.35gb": 1, "1g.35gb": 2}),
    (H200, "shrink one 3g.71gb to 3x1g", {"3g.71gb": 2}, {"3g.71gb": 1, "1g.18gb": 3}),
    (H200, "4g + 3x1g -> 4g + 2x1g", {"4g.71gb": 1, "1g.18gb": 3}, {"4g.71gb": 1, "1g.18gb": 2}),
    (H200, "empty -> 4g + 3x1g", {}, {"4g.71gb": 1, "1g.18gb": 3}),
    (H200, "all-1g.35gb -> 2x1g.35gb + 2g", {"1g.35gb": 4}, {"1g.35gb": 2, "2g.35gb": 1}),
    (H200, "7g.141gb -> all-1g.18gb", {"7g.141gb": 1}, {"1g.18gb": 7}),
    (H200, "all-1g.18gb -> 4g + 3x1g", {"1g.18gb": 7}, {"4g.71gb": 1, "1g.18gb": 3}),
    (H200, "add a 2g to 4g + 1x1g", {"4g.71gb": 1, "1g.18gb": 1}, {"4g.71gb": 1, "1g.18gb": 1, "2g.35gb": 1}),
]


class Recorder(object):
    """Counts the mutating NVML calls made through a backend."""

    def __init__(self, backend):
        self._backend = backend
        self.calls = Counter()

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name in MUTATING_CALLS:
            def call(*args, **kw):
                self.calls[name] += 1
                return attr(*args, **kw)
            return call
        return attr


def layout(mig_devices):
    return {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices}]}


def new_host(path, model, count=1):
    state = nvml_sim.new_state([{"model": model, "count": count}], seed=11)
    for g in state["gpus"]:
        g["mig_mode_current"] = g["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)


def apply_ours(path, mig_devices):
    with nvml.open_nvml(path) as backend:
        rec = Recorder(backend)
        result = mig_engine.run_mig_partition(rec, layout(mig_devices))
    return rec.calls, result


def _device_counts(gpu):
    return Counter(r["profile"] for r in gpu["instances"] if mig_instances.row_is_mig_device(r))


def _target_devices(targets, pmap):
    out = Counter()
    for t in targets:
        for name in mig_plan.mig_device_names(t.profile, t.compute_instances, pmap[t.profile].compute_slices):
            out[name] += 1
    return out


def _clear(b, index):
    for inst in mig_instances.instances_from_gpu(gpu_state.read_gpu(b, index)):
        mig_changes.destroy_instance(b, index, inst.gpu_instance_id)


def apply_flush(path, mig_devices):
    """mig-parted's SetMigConfig on GPU 0: flush and recreate when the profile counts differ."""
    with nvml.open_nvml(path) as backend:
        b = Recorder(backend)
        index = 0
        gpu = gpu_state.read_gpu(b, index)
        profiles = gpu_state.live_profiles(b, index)
        pmap = mig_plan.profile_map(profiles)
        targets = mig_plan.targets_from_mig_devices(mig_devices, profiles)
        destroyed = mig_instances.instances_from_gpu(gpu)
        if _device_counts(gpu) == _target_devices(targets, pmap):
            return b.calls, None
        # flattened and sorted as mig-parted: largest G first, then largest C
        flat = []
        for t in targets:
            for c in t.compute_instances:
                flat.append((pmap[t.profile].compute_slices, c, t.profile))
        flat.sort(key=lambda x: (-x[0], -x[1]))
        handle = b.nvmlDeviceGetHandleByIndex(index)
        tried = set()
        for order in itertools.permutations(flat):
            if order in tried:
                continue
            tried.add(order)
            _clear(b, index)
            gpu_state.invalidate(b, index)
            try:
                prev = None  # (profile, gi handle, free compute slices)
                for g, c, profile in order:
                    p = pmap[profile]
                    if c < g and prev is not None and prev[0] == profile and prev[2] >= c:
                        gi = prev[1]
                        prev = (profile, gi, prev[2] - c)
                    else:
                        gi = b.nvmlDeviceCreateGpuInstance(handle, p.profile_id)
                        prev = (profile, gi, g - c)
                    info = b.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, gpu_catalog.CI_PROFILE_BY_SLICES[c], 0)
                    b.nvmlGpuInstanceCreateComputeInstance(gi, int(info.id))
                return b.calls, destroyed
            except NvmlError:
                continue
        raise RuntimeError("flush-and-recreate found no ordering for %s" % mig_devices)


def _ikey(i):
    return (i.profile, tuple(i.compute_instances), i.start)


def recreated(destroyed, final):
    """Destroyed instances that exist again afterwards with the same profile, CI split and placement:
    destroyed for nothing (their workload was killed although the instance stays in the target)."""
    left = Counter(_ikey(i) for i in final)
    n = 0
    for i in destroyed:
        if left[_ikey(i)]:
            left[_ikey(i)] -= 1
            n += 1
    return n


def run_transition(tmp, model, start, target):
    a = os.path.join(tmp, "ours.json")
    new_host(a, model)
    for step in (start if isinstance(start, list) else [start]):
        if step:
            apply_ours(a, step)
    f = os.path.join(tmp, "flush.json")
    shutil.copyfile(a, f)
    with nvml.open_nvml(a) as backend:
        before = mig_instances.instances_from_gpu(gpu_state.read_gpu(backend, 0))
        profiles = gpu_state.live_profiles(backend, 0)
    targets = mig_plan.targets_from_mig_devices(target, profiles)

    calls, result = apply_ours(a, target)
    destroyed_ids = set(x["gpu_instance_id"] for x in result["actions"] if x["action"] == "destroy")
    ours_destroyed = [i for i in before if i.gpu_instance_id in destroyed_ids]
    fcalls, flushed = apply_flush(f, target)
    flushed_list = flushed or []
    with nvml.open_nvml(a) as backend:
        targets = mig_plan.targets_from_mig_devices(target, gpu_state.live_profiles(backend, 0))
    with nvml.open_nvml(a) as b1, nvml.open_nvml(f) as b2:
        g1, g2 = gpu_state.read_gpu(b1, 0), gpu_state.read_gpu(b2, 0)
    # both end in the target profile counts
    assert _device_counts(g1) == _device_counts(g2), (_device_counts(g1), _device_counts(g2))
    final1, final2 = mig_instances.instances_from_gpu(g1), mig_instances.instances_from_gpu(g2)
    # the flush without retries: every CI and GI destroyed, every GI and CI of the target created once
    if flushed is not None:
        ideal = sum(max(1, len(i.compute_instances)) + 1 for i in before) + \
            sum(len(t.compute_instances) + 1 for t in targets)
    else:
        ideal = 0
    return {
        "flush_ideal": ideal,
        "ours_calls": sum(calls.values()), "ours_destroyed": len(ours_destroyed),
        "ours_needless": recreated(ours_destroyed, final1),
        "flush_calls": sum(fcalls.values()), "flush_destroyed": len(flushed_list),
        "flush_needless": recreated(flushed_list, final2),
    }


def fmt(devices):
    if not devices:
        return "(none)"
    return " ".join("%dx%s" % (n, p) for p, n in sorted(devices.items()))


def time_gpu_info(tmp, repeat=20):
    path = os.path.join(tmp, "eight.json")
    new_host(path, A100, 8)
    apply_ours(path, {"1g.10gb": 7})
    samples = []
    for dummy in range(repeat):
        t0 = time.perf_counter()
        with nvml.open_nvml(path) as backend:
            host = gpu_state.read_host(backend)
        samples.append(time.perf_counter() - t0)
    assert len(host["gpus"]) == 8 and sum(len(g["instances"]) for g in host["gpus"]) == 56
    samples.sort()
    # the whole module as a process: python start-up, imports, argument parsing, the read, JSON out
    args = os.path.join(tmp, "args.json")
    with open(args, "w") as f:
        json.dump({"ANSIBLE_MODULE_ARGS": {"simulator": path}}, f)
    env = dict(os.environ, PYTHONPATH=_root)
    procs = []
    for dummy in range(5):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "ansible_collections.gpuops.k8s.plugins.modules.gpu_info", args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=True)
        procs.append(time.perf_counter() - t0)
        assert len(json.loads(out.stdout)["gpus"]) == 8
    procs.sort()
    return samples[len(samples) // 2], samples[0], samples[-1], procs[len(procs) // 2]


def main():
    tmp = tempfile.mkdtemp(prefix="gpuops-bench-")
    try:
        rows = []
        for n, (model, name, start, target) in enumerate(TRANSITIONS, 1):
            r = run_transition(tmp, model, start, target)
            rows.append((n, model, name, r))
        head = "%-3s %-11s %-38s | %-22s | %-29s" % (
            "#", "GPU", "transition", "gpuops.k8s plan", "mig-parted flush-and-recreate")
        sub = "%-3s %-11s %-38s | %5s %9s %6s | %5s %6s %9s %6s" % (
            "", "", "", "calls", "destroyed", "again", "calls", "ideal", "destroyed", "again")
        print(head)
        print(sub)
        print("-" * len(sub))
        tot = Counter()
        for n, model, name, r in rows:
            print("%-3d %-11s %-38s | %5d %9d %6d | %5d %6d %9d %6d" % (
                n, model, name, r["ours_calls"], r["ours_destroyed"], r["ours_needless"],
                r["flush_calls"], r["flush_ideal"], r["flush_destroyed"], r["flush_needless"]))
            tot.update(r)
        print("-" * len(sub))
        print("%-3s %-11s %-38s | %5d %9d %6d | %5d %6d %9d %6d" % (
            "", "total", "%d transitions" % len(rows), tot["ours_calls"], tot["ours_destroyed"], tot["ours_needless"],
            tot["flush_calls"], tot["flush_ideal"], tot["flush_destroyed"], tot["flush_needless"]))
        ratio = float(tot["ours_calls"]) / tot["flush_ideal"] if tot["flush_ideal"] else 0.0
        print("")
        print("mutating NVML calls: %d vs %d for flush-and-recreate as executed (with mig-parted's re-orderings when "
              "the driver-chosen slots do not fit) and %d without any retry" % (
                  tot["ours_calls"], tot["flush_calls"], tot["flush_ideal"]))
        print("  -> %.0f%% of the retry-free flush (target <= 50%%), %.0f%% of the flush as executed"
              % (100 * ratio, 100.0 * tot["ours_calls"] / max(1, tot["flush_calls"])))
        print("instances destroyed and recreated identically (same profile, CIs, placement): %d (target 0) vs %d "
              "with flush-and-recreate"
              % (tot["ours_needless"], tot["flush_needless"]))
        med, lo, hi, proc = time_gpu_info(tmp)
        print("gpu_info read of an 8-GPU host (8x A100 80GB, 56 MIG devices, simulator): median %.1f ms "
              "(min %.1f, max %.1f, 20 runs); the gpu_info module as a process (python start-up, imports, "
              "read, JSON): median %.0f ms (5 runs)" % (med * 1000, lo * 1000, hi * 1000, proc * 1000))
        print("target 'zero destroys of instances that stay': %s; target 'calls <= 50%% of flush': %s against the "
              "flush as executed on the simulator, %s against the retry-free flush"
              % ("met" if tot["ours_needless"] == 0 else "NOT met",
                 "met" if tot["ours_calls"] * 2 <= tot["flush_calls"] else "NOT met",
                 "met" if ratio <= 0.5 else "NOT met"))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
