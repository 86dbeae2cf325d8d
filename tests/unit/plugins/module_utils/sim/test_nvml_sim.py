# -*- coding: utf-8 -*-
"""The NVML simulator obeys the MIG rules of the catalog and pynvml's error codes."""

import json

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import (
    GPU_IS_LOST, IN_USE, INSUFFICIENT_RESOURCES, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, RESET_REQUIRED,
    UNINITIALIZED, NvmlError, open_nvml)

MIG_MODELS = [k for k, m in sorted(gpu_catalog.CATALOG.items()) if m.profiles]
PLAIN_MODELS = [k for k, m in sorted(gpu_catalog.CATALOG.items()) if not m.profiles]


def make(tmp_path, gpus, **kw):
    path = str(tmp_path / "state.json")
    nvml_sim.save_state(path, nvml_sim.new_state(gpus, seed=1, **kw))
    return path


def mig_on(nv, index):
    """Enable MIG mode and make it current (reset on Ampere)."""
    h = nv.nvmlDeviceGetHandleByIndex(index)
    nv.nvmlDeviceSetMigMode(h, 1)
    if nv.nvmlDeviceGetMigMode(h) != [1, 1]:
        nv.reset_gpu(index)
    assert nv.nvmlDeviceGetMigMode(h) == [1, 1]
    return h


def pid_of(model, name):
    return gpu_catalog.get_profile(model, name).profile_id


def code(excinfo):
    return excinfo.value.value


def test_identity_and_pci_packing(tmp_path):
    path = make(tmp_path, [{"model": "h100_80gb", "count": 2}, {"model": "NVIDIA L40S", "count": 1}],
                driver_version="550.127.08")
    with open_nvml(path) as nv:
        assert nv.nvmlDeviceGetCount() == 3
        assert nv.nvmlSystemGetDriverVersion() == "550.127.08"
        assert nv.nvmlSystemGetCudaDriverVersion() == 12040
        h = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceGetName(h) == "NVIDIA H100 80GB HBM3"
        pci = nv.nvmlDeviceGetPciInfo(h)
        assert pci.pciDeviceId == 0x233010DE
        assert pci.busId.startswith(b"00000000:")
        assert nv.nvmlDeviceGetMemoryInfo(h).total == 81559 * 1024 * 1024
        uuid = nv.nvmlDeviceGetUUID(h)
        assert uuid.startswith("GPU-")
        assert nv.nvmlDeviceGetHandleByUUID(uuid) == h
        assert nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(2)) == "NVIDIA L40S"
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetHandleByIndex(3)
        assert code(e) == INVALID_ARGUMENT
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetHandleByUUID("GPU-nope")
        assert code(e) == NOT_FOUND


def test_calls_need_init(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}])
    nv = nvml_sim.SimBackend(path)
    with pytest.raises(NvmlError) as e:
        nv.nvmlDeviceGetCount()
    assert code(e) == UNINITIALIZED


@pytest.mark.parametrize("key", PLAIN_MODELS)
def test_non_mig_models_not_supported(tmp_path, key):
    path = make(tmp_path, [{"model": key}])
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        for call, args in [("nvmlDeviceGetMigMode", ()), ("nvmlDeviceSetMigMode", (1,)),
                           ("nvmlDeviceGetGpuInstanceProfileInfo", (0,)),
                           ("nvmlDeviceGetGpuInstancePossiblePlacements", (19,))]:
            with pytest.raises(NvmlError) as e:
                getattr(nv, call)(h, *args)
            assert code(e) == NOT_SUPPORTED, call


def test_ampere_mig_mode_pending_until_reset_and_persists_over_reboot(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}])
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceSetMigMode(h, 1) == RESET_REQUIRED
        assert nv.nvmlDeviceGetMigMode(h) == [0, 1]
        # GI ops refused while MIG mode is only pending
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstance(h, 19)
        assert code(e) == NOT_SUPPORTED
        nv.reset_gpu(0)
        assert nv.nvmlDeviceGetMigMode(h) == [1, 1]
        assert nv.nvmlDeviceSetMigMode(h, 1) == 0
    state = nvml_sim.reboot_state(nvml_sim.load_state(path))
    assert (state["gpus"][0]["mig_mode_current"], state["gpus"][0]["mig_mode_pending"]) == (1, 1)


@pytest.mark.parametrize("key", ["h100_80gb", "h200_141gb", "b200_180gb", "gh200_96gb"])
def test_hopper_and_newer_mig_mode_applies_at_once_lost_on_reset_and_reboot(tmp_path, key):
    path = make(tmp_path, [{"model": key}])
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceSetMigMode(h, 1) == 0
        assert nv.nvmlDeviceGetMigMode(h) == [1, 1]
        nv.reset_gpu(0)
        assert nv.nvmlDeviceGetMigMode(h) == [0, 0]
        nv.nvmlDeviceSetMigMode(h, 1)
    state = nvml_sim.reboot_state(nvml_sim.load_state(path))
    assert (state["gpus"][0]["mig_mode_current"], state["gpus"][0]["mig_mode_pending"]) == (0, 0)


@pytest.mark.parametrize("key", MIG_MODELS)
def test_profiles_placements_and_max_counts_follow_the_catalog(tmp_path, key):
    model = gpu_catalog.CATALOG[key]
    path = make(tmp_path, [{"model": key}])
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        for const in range(gpu_catalog.GI_PROFILE_COUNT):
            p = gpu_catalog.profile_by_constant(model, const)
            if p is None:
                with pytest.raises(NvmlError) as e:
                    nv.nvmlDeviceGetGpuInstanceProfileInfo(h, const)
                assert code(e) == NOT_SUPPORTED
                continue
            info = nv.nvmlDeviceGetGpuInstanceProfileInfo(h, const)
            assert info.id == p.profile_id
            assert info.sliceCount == p.compute_slices
            assert info.instanceCount == p.max_instances
            assert info.memorySizeMB == p.memory_mib
            assert info.name == ("MIG " + p.name).encode()
            placements = nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, p.profile_id)
            assert [(x.start, x.size) for x in placements] == [(s, p.memory_slices) for s in p.placements]
        # fill the GPU with each profile in turn: exactly max_instances (bounded by slices) fit
        for p in model.profiles:
            capacity = nv.nvmlDeviceGetGpuInstanceRemainingCapacity(h, p.profile_id)
            made = []
            while True:
                try:
                    made.append(nv.nvmlDeviceCreateGpuInstance(h, p.profile_id))
                except NvmlError as e:
                    assert e.value == INSUFFICIENT_RESOURCES
                    break
            expected = 0
            used_mem, used_compute = set(), 0
            for s in p.placements:
                span = set(range(s, s + p.memory_slices))
                if expected < p.max_instances and not span & used_mem and \
                        used_compute + p.compute_slices <= model.compute_slices:
                    used_mem |= span
                    used_compute += p.compute_slices
                    expected += 1
            assert len(made) == expected, p.name
            assert expected >= 1
            assert capacity == expected, p.name
            assert nv.nvmlDeviceGetGpuInstanceRemainingCapacity(h, p.profile_id) == 0
            for gi in made:
                nv.nvmlGpuInstanceDestroy(gi)


def test_gi_ids_swizzle_and_overlap_is_insufficient_resources(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}])
    m = gpu_catalog.CATALOG["a100_80gb"]
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        gi3 = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "3g.40gb"), {"start": 4, "size": 4})
        assert nv.nvmlGpuInstanceGetInfo(gi3).id == 2
        gi1 = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "1g.10gb"), {"start": 0, "size": 1})
        assert nv.nvmlGpuInstanceGetInfo(gi1).id == 7
        # overlapping the 3g.40gb (slices 4-7)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "1g.10gb"), {"start": 5, "size": 1})
        assert code(e) == INSUFFICIENT_RESOURCES
        # occupied
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "1g.10gb"), {"start": 0, "size": 1})
        assert code(e) == INSUFFICIENT_RESOURCES
        # 4g.40gb only at 0: overlaps the 1g
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "4g.40gb"), {"start": 0, "size": 4})
        assert code(e) == INSUFFICIENT_RESOURCES
        # invalid placement start / size
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "2g.20gb"), {"start": 1, "size": 2})
        assert code(e) == INVALID_ARGUMENT
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "2g.20gb"), {"start": 2, "size": 1})
        assert code(e) == INVALID_ARGUMENT
        # a profile id the model does not have
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceCreateGpuInstance(h, 4242)
        assert code(e) == INVALID_ARGUMENT
        # without placement the driver picks the first free slot
        gi = nv.nvmlDeviceCreateGpuInstance(h, pid_of(m, "1g.10gb"))
        assert nv.nvmlGpuInstanceGetInfo(gi).placement.start == 1
        assert [nv.nvmlGpuInstanceGetInfo(g).id for g in nv.nvmlDeviceGetGpuInstances(h, pid_of(m, "1g.10gb"))] == [7, 8]
        assert nv.nvmlDeviceGetGpuInstanceById(h, 2) == gi3
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetGpuInstanceById(h, 3)
        assert code(e) == NOT_FOUND


def test_compute_slices_never_exceed_the_model():
    """4g.40gb + 3g.40gb use all 7 compute slices of an A100; no 1g fits the remaining memory."""
    m = gpu_catalog.CATALOG["a100_80gb"]
    gpu = {"gpu_instances": [
        {"id": 1, "profile_id": pid_of(m, "4g.40gb"), "start": 0, "size": 4, "compute_instances": []},
    ]}
    sim = nvml_sim.SimBackend("/nonexistent")
    three = gpu_catalog.get_profile(m, "3g.40gb")
    assert sim._gi_fits(gpu, m, three, 4) == 0
    # a 3g.40gb at 4 next to a 4g uses all 7 compute slices; with an extra 1g-worth of compute used
    # by a fake GI in unused memory the compute check trips
    gpu["gpu_instances"].append({"id": 99, "profile_id": pid_of(m, "1g.10gb"), "start": 9, "size": 1,
                                 "compute_instances": []})
    assert sim._gi_fits(gpu, m, three, 4) == INSUFFICIENT_RESOURCES


def test_compute_instances_inside_a_gpu_instance(tmp_path):
    path = make(tmp_path, [{"model": "h100_80gb"}])
    m = gpu_catalog.CATALOG["h100_80gb"]
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, pid_of(m, "3g.40gb"), {"start": 0, "size": 4})
        # 3g allows CI sizes 1, 2, 3 (go-nvlib rule)
        sizes = []
        for const in range(9):
            try:
                info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, const, 0)
            except NvmlError as e:
                assert e.value in (NOT_SUPPORTED, INVALID_ARGUMENT)
                continue
            sizes.append(info.sliceCount)
        assert sorted(sizes) == list(gpu_catalog.ci_slice_options(3)) == [1, 2, 3]
        assert nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0).name == b"MIG 1c.3g.40gb"
        two = nv.nvmlGpuInstanceCreateComputeInstance(gi, 1)
        one = nv.nvmlGpuInstanceCreateComputeInstance(gi, 0)
        assert nv.nvmlComputeInstanceGetInfo(two).placement.start == 0
        assert nv.nvmlComputeInstanceGetInfo(one).placement.start == 2
        with pytest.raises(NvmlError) as e:
            nv.nvmlGpuInstanceCreateComputeInstance(gi, 0)
        assert code(e) == INSUFFICIENT_RESOURCES
        assert nv.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0) == 0
        # GI with CIs cannot be destroyed
        with pytest.raises(NvmlError) as e:
            nv.nvmlGpuInstanceDestroy(gi)
        assert code(e) == IN_USE
        # MIG devices
        assert nv.nvmlDeviceGetMaxMigDeviceCount(h) == 7
        mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
        assert nv.nvmlDeviceIsMigDeviceHandle(mig) == 1
        assert nv.nvmlDeviceGetUUID(mig).startswith("MIG-")
        assert nv.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 2c.3g.40gb"
        assert nv.nvmlDeviceGetHandleByUUID(nv.nvmlDeviceGetUUID(mig)) == mig
        assert nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig) == h
        assert (nv.nvmlDeviceGetGpuInstanceId(mig), nv.nvmlDeviceGetComputeInstanceId(mig)) == (2 - 1, 0)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetMigDeviceHandleByIndex(h, 2)
        assert code(e) == NOT_FOUND
        nv.nvmlComputeInstanceDestroy(one)
        nv.nvmlComputeInstanceDestroy(two)
        nv.nvmlGpuInstanceDestroy(gi)
        assert nv.nvmlDeviceGetGpuInstances(h, pid_of(m, "3g.40gb")) == []


def test_seven_g_allows_four_c_but_four_g_does_not_allow_three_c(tmp_path):
    path = make(tmp_path, [{"model": "a100_40gb"}])
    m = gpu_catalog.CATALOG["a100_40gb"]
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        gi = nv.nvmlDeviceCreateGpuInstance(h, pid_of(m, "4g.20gb"))
        with pytest.raises(NvmlError) as e:
            nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, gpu_catalog.CI_PROFILE_BY_SLICES[3], 0)
        assert code(e) == NOT_SUPPORTED
        nv.nvmlGpuInstanceDestroy(gi)
        gi = nv.nvmlDeviceCreateGpuInstance(h, pid_of(m, "7g.40gb"))
        info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, gpu_catalog.CI_PROFILE_BY_SLICES[4], 0)
        assert info.sliceCount == 4 and info.instanceCount == 1


def test_busy_rules(tmp_path):
    path = make(tmp_path, [{"model": "h100_80gb"}])
    m = gpu_catalog.CATALOG["h100_80gb"]
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        gi = nv.nvmlDeviceCreateGpuInstance(h, pid_of(m, "1g.10gb"))
        ci = nv.nvmlGpuInstanceCreateComputeInstance(gi, 0)
        gi_id = nv.nvmlGpuInstanceGetInfo(gi).id
    state = nvml_sim.load_state(path)
    state["gpus"][0]["processes"] = [{"pid": 99, "name": "vllm", "gpu_instance_id": gi_id}]
    nvml_sim.save_state(path, state)
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
        assert [(p.pid, p.gpuInstanceId, p.computeInstanceId) for p in procs] == [(99, gi_id, 0)]
        assert nv.nvmlSystemGetProcessName(99) == "vllm"
        for call, args in [("nvmlComputeInstanceDestroy", (ci,)), ("nvmlGpuInstanceDestroy", (gi,)),
                           ("nvmlDeviceSetMigMode", (h, 0)), ("reset_gpu", (0,))]:
            with pytest.raises(NvmlError) as e:
                getattr(nv, call)(*args)
            assert code(e) == IN_USE, call
        mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)
        assert [p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(mig)] == [99]


def test_disabling_mig_with_instances_is_in_use(tmp_path):
    path = make(tmp_path, [{"model": "h200_141gb"}])
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        nv.nvmlDeviceCreateGpuInstance(h, 19)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceSetMigMode(h, 0)
        assert code(e) == IN_USE


def test_faults_fire_count_times_and_persist(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb", "count": 2}])
    state = nvml_sim.load_state(path)
    state["faults"] = [{"call": "nvmlDeviceGetName", "error": "NVML_ERROR_UNKNOWN", "count": 2},
                       {"call": "nvmlDeviceGetUUID", "error": "GPU_IS_LOST", "gpu": 1}]
    nvml_sim.save_state(path, state)
    with open_nvml(path) as nv:
        h0 = nv.nvmlDeviceGetHandleByIndex(0)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetName(h0)
        assert code(e) == 999 and e.value.details["injected"]
    # the decrement is persisted across opens
    assert nvml_sim.load_state(path)["faults"][0]["count"] == 1
    with open_nvml(path) as nv:
        h0, h1 = nv.nvmlDeviceGetHandleByIndex(0), nv.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(NvmlError):
            nv.nvmlDeviceGetName(h0)
        assert nv.nvmlDeviceGetName(h0) == "NVIDIA A100-SXM4-80GB"
        # permanent fault scoped to GPU 1
        assert nv.nvmlDeviceGetUUID(h0).startswith("GPU-")
        for dummy in range(3):
            with pytest.raises(NvmlError) as e:
                nv.nvmlDeviceGetUUID(h1)
            assert code(e) == GPU_IS_LOST
    assert [f["call"] for f in nvml_sim.load_state(path)["faults"]] == ["nvmlDeviceGetUUID"]


def test_lost_gpu_and_health_readings(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb", "count": 2}])
    state = nvml_sim.load_state(path)
    state["gpus"][0]["health"] = {"ecc_volatile_uncorrected": 3, "retired_pages_pending": True,
                                  "remapped_rows_failure": True, "temperature_c": 90, "power_w": 250.5}
    state["gpus"][1]["health"] = {"lost": True}
    nvml_sim.save_state(path, state)
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        assert nv.nvmlDeviceGetTotalEccErrors(h, 1, 0) == 3
        assert nv.nvmlDeviceGetTotalEccErrors(h, 1, 1) == 0
        assert nv.nvmlDeviceGetRetiredPagesPendingStatus(h) == 1
        assert nv.nvmlDeviceGetRemappedRows(h)[3] == 1
        assert nv.nvmlDeviceGetTemperature(h, 0) == 90
        assert nv.nvmlDeviceGetPowerUsage(h) == 250500
        lost = nv.nvmlDeviceGetHandleByIndex(1)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceGetName(lost)
        assert code(e) == GPU_IS_LOST
        nv.reset_gpu(0)
        assert nv.nvmlDeviceGetTotalEccErrors(h, 1, 0) == 0
        nv.reset_gpu(1)
        assert nv.nvmlDeviceGetName(lost) == "NVIDIA A100-SXM4-80GB"


def test_settings_getters_and_setters(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}, {"model": "rtx4090_24gb"}])
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        nv.nvmlDeviceSetPersistenceMode(h, 1)
        assert nv.nvmlDeviceGetPersistenceMode(h) == 1
        nv.nvmlDeviceSetComputeMode(h, 3)
        assert nv.nvmlDeviceGetComputeMode(h) == 3
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceSetComputeMode(h, 1)
        assert code(e) == NOT_SUPPORTED
        assert nv.nvmlDeviceGetEccMode(h) == [1, 1]
        nv.nvmlDeviceSetEccMode(h, 0)
        assert nv.nvmlDeviceGetEccMode(h) == [1, 0]
        lo, hi = nv.nvmlDeviceGetPowerManagementLimitConstraints(h)
        nv.nvmlDeviceSetPowerManagementLimit(h, lo)
        assert nv.nvmlDeviceGetPowerManagementLimit(h) == lo
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceSetPowerManagementLimit(h, hi + 1)
        assert code(e) == INVALID_ARGUMENT
        mem = nv.nvmlDeviceGetSupportedMemoryClocks(h)[0]
        gr = nv.nvmlDeviceGetSupportedGraphicsClocks(h, mem)[-1]
        nv.nvmlDeviceSetApplicationsClocks(h, mem, gr)
        assert (nv.nvmlDeviceGetApplicationsClock(h, 2), nv.nvmlDeviceGetApplicationsClock(h, 0)) == (mem, gr)
        with pytest.raises(NvmlError) as e:
            nv.nvmlDeviceSetApplicationsClocks(h, mem, gr + 1)
        assert code(e) == INVALID_ARGUMENT
        nv.nvmlDeviceResetApplicationsClocks(h)
        assert nv.nvmlDeviceGetApplicationsClock(h, 0) == nv.nvmlDeviceGetDefaultApplicationsClock(h, 0)
        nv.nvmlDeviceSetApplicationsClocks(h, mem, gr)
        consumer = nv.nvmlDeviceGetHandleByIndex(1)
        for call in ("nvmlDeviceGetEccMode", "nvmlDeviceGetSupportedMemoryClocks"):
            with pytest.raises(NvmlError) as e:
                getattr(nv, call)(consumer)
            assert code(e) == NOT_SUPPORTED
    # pending ECC mode applies, non-persistent settings revert at reboot
    state = nvml_sim.reboot_state(nvml_sim.load_state(path))
    s = state["gpus"][0]["settings"]
    assert (s["ecc_mode_current"], s["persistence_mode"], s["compute_mode"]) == (0, 0, 0)
    assert s["power_limit_mw"] == hi


def test_reboot_drops_instances_and_processes(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}])
    with open_nvml(path) as nv:
        h = mig_on(nv, 0)
        nv.nvmlDeviceCreateGpuInstance(h, 19)
    state = nvml_sim.load_state(path)
    state["gpus"][0]["processes"] = [{"pid": 5, "gpu_instance_id": 7}]
    state = nvml_sim.reboot_state(state)
    assert state["gpus"][0]["gpu_instances"] == [] and state["gpus"][0]["processes"] == []
    assert state["boot_id"] == 2


def test_state_file_errors(tmp_path):
    with pytest.raises(GpuOpsError) as e:
        with open_nvml(str(tmp_path / "missing.json")):
            pass
    assert "does not exist" in e.value.msg and "nvml_simulator" in e.value.msg
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(GpuOpsError) as e:
        with open_nvml(str(bad)):
            pass
    assert "not valid JSON" in e.value.msg


def test_env_variable_selects_the_simulator(tmp_path, monkeypatch):
    path = make(tmp_path, [{"model": "l4_24gb"}])
    monkeypatch.setenv("GPUOPS_NVML_SIMULATOR", path)
    with open_nvml() as nv:
        assert nv.kind == "simulator"
        assert nv.nvmlDeviceGetCount() == 1


def test_read_only_calls_do_not_write(tmp_path):
    path = make(tmp_path, [{"model": "a100_80gb"}])
    before = open(path).read()
    with open_nvml(path) as nv:
        h = nv.nvmlDeviceGetHandleByIndex(0)
        nv.nvmlDeviceGetMigMode(h)
        nv.nvmlDeviceGetName(h)
    assert open(path).read() == before
    json.loads(before)


def test_every_listed_call_exists():
    sim = nvml_sim.SimBackend("/x")
    for call in nvml_sim.SIM_CALLS:
        assert callable(getattr(sim, call)), call
