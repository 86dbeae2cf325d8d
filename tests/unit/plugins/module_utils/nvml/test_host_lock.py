# -*- coding: utf-8 -*-
"""Issue 16 item 1: mutating NVML work is serialized per host (no lost update between concurrent runs)."""
import multiprocessing
import os

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import gpu_state
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

LAYOUTS = ({"1g.10gb": 7}, {"3g.40gb": 2})


def _host(tmp_path, count=2):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": count}], seed=3)
    for gpu in state["gpus"]:
        gpu["mig_mode_current"] = gpu["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def _partition(path, device, mig_devices, barrier, out):
    barrier.wait()
    try:
        with nvml.open_nvml(path) as backend:
            r = mig_engine.run_mig_partition(backend, {"layout": [
                {"devices": [device], "mig-enabled": True, "mig-devices": mig_devices}]})
        out.put((device, r["changed"], None))
    except Exception as e:  # report to the parent
        out.put((device, None, str(e)))


def _profiles(path, index):
    with nvml.open_nvml(path) as backend:
        gpu = gpu_state.read_gpu(backend, index)
    return sorted(i.profile for i in mig_instances.instances_from_gpu(gpu))


def _expected(mig_devices):
    return sorted(p for p, n in mig_devices.items() for dummy in range(n))


def test_concurrent_runs_on_two_gpus_lose_no_change(tmp_path):
    path = _host(tmp_path)
    ctx = multiprocessing.get_context("fork")
    lost = []
    for rnd in range(10):
        want = {0: LAYOUTS[rnd % 2], 1: LAYOUTS[(rnd + 1) % 2]}
        barrier = ctx.Barrier(2)
        out = ctx.Queue()
        procs = [ctx.Process(target=_partition, args=(path, i, want[i], barrier, out)) for i in (0, 1)]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for dummy in procs]
        for p in procs:
            p.join(60)
        assert all(err is None for dummy, dummy2, err in results), results
        # every run changes its GPU (a lost change of the round before would make it unchanged)
        lost.extend((rnd, i, "unchanged") for i, changed, dummy in results if not changed)
        lost.extend((rnd, i, "lost") for i in (0, 1) if _profiles(path, i) != _expected(want[i]))
    assert lost == []


def test_lock_timeout_names_the_holder(tmp_path, monkeypatch):
    path = _host(tmp_path, count=1)
    monkeypatch.setenv("GPUOPS_NVML_LOCK_TIMEOUT", "0.3")
    holder = nvml.HostLock(nvml_sim.lock_path(path), what="test holder play")
    holder.acquire()
    try:
        ctx = multiprocessing.get_context("fork")
        barrier = ctx.Barrier(1)
        out = ctx.Queue()
        p = ctx.Process(target=_partition, args=(path, 0, {"7g.80gb": 1}, barrier, out))
        p.start()
        dummy, changed, err = out.get(timeout=60)
        p.join(30)
    finally:
        holder.release()
    assert changed is None and err
    assert "pid %d (parent" % os.getpid() in err and "test holder play" in err and "0.3" in err
    assert _profiles(path, 0) == []  # nothing changed
    with nvml.open_nvml(path) as backend:  # and once released, the run goes through
        r = mig_engine.run_mig_partition(backend, {"layout": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]})
    assert r["changed"] and _profiles(path, 0) == ["7g.80gb"]


def test_lock_is_reentrant_and_check_mode_takes_none(tmp_path):
    path = _host(tmp_path, count=1)
    lock = nvml.HostLock(nvml_sim.lock_path(path), what="outer")
    lock.acquire()
    try:
        with nvml.open_nvml(path) as backend:  # check mode changes nothing and needs no lock
            r = mig_engine.run_mig_partition(backend, {"layout": [
                {"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}, check_mode=True)
        assert r["changed"]
    finally:
        lock.release()


def test_run_locked_holds_the_lock_only_outside_check_mode_and_records_the_backend(tmp_path):
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import writable

    path = _host(tmp_path, count=1)
    seen = []

    def run(backend, params, check_mode=False):
        seen.append((check_mode, backend.host_lock("probe").held))
        return {"changed": False}

    assert writable.run_locked(run, {"simulator": path}, "test", check_mode=True) == {"changed": False,
                                                                                      "backend": "simulator"}
    assert writable.run_locked(run, {"simulator": path}, "test")["backend"] == "simulator"
    assert seen == [(True, False), (False, True)]


def test_real_backend_lock_path_falls_back_when_run_is_not_usable(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUOPS_NVML_LOCK", raising=False)
    not_a_dir = tmp_path / "run-is-a-file"
    not_a_dir.write_text("x")  # /run/gpuops cannot be created there, even as root
    got = nvml.host_lock_path(run_dir=str(not_a_dir))
    assert not got.startswith(str(not_a_dir)) and got.endswith(".lock") and "gpuops-nvml" in got
    assert nvml.host_lock_path(run_dir=str(tmp_path)) == str(tmp_path / "gpuops" / "nvml.lock")
    monkeypatch.setenv("GPUOPS_NVML_LOCK", str(tmp_path / "x.lock"))
    assert nvml.host_lock_path(run_dir=str(not_a_dir)) == str(tmp_path / "x.lock")


def test_bad_lock_timeout_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_NVML_LOCK_TIMEOUT", "soon")
    with pytest.raises(GpuOpsError) as e:
        nvml.lock_timeout()
    assert "GPUOPS_NVML_LOCK_TIMEOUT" in e.value.msg
