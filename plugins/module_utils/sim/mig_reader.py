# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML simulator's MIG queries: GPU/compute instance profiles, placements, remaining capacity,
instances and MIG device handles (part of ``sim.reader.SimReader``)."""

from __future__ import annotations

from typing import Any, Callable, List, TYPE_CHECKING

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import INSUFFICIENT_RESOURCES, INVALID_ARGUMENT, NOT_FOUND, NOT_SUPPORTED, NvmlError
from ansible_collections.gpuops.k8s.plugins.module_utils.sim.state import ComputeInstanceHandle, DeviceHandle, GpuInstanceHandle, Obj


# first driver branch known to list GPU instance profiles while MIG mode is disabled (observed: 580.159.04)
PROFILES_WITHOUT_MIG_DRIVER = 580


class MigReads(object):
    """GPU instance, compute instance and MIG device queries over ``self.state``."""

    if TYPE_CHECKING:  # the state and its lookups come with SimReader, which mixes this class in
        state: Any
        _gpu: Callable[..., Any]
        _model: Callable[..., Any]
        _mig_gpu: Callable[..., Any]
        _profile_by_id: Callable[..., Any]
        _find_gi: Callable[..., Any]
        _gi: Callable[..., Any]
        _ci: Callable[..., Any]
        _find_ci: Callable[..., Any]
        _gi_profile: Callable[..., Any]

    # -- GPU instance profiles -------------------------------------------------------------------
    def _gi_profile_info(self, call, model, p):
        eng = gpu_catalog.profile_engines(model, p)
        return Obj(
            version=0x02000098, id=p.profile_id, isP2pSupported=0, sliceCount=p.compute_slices,
            instanceCount=p.max_instances, multiprocessorCount=p.sm or 0,
            copyEngineCount=eng["copy"], decoderCount=eng["decoder"], encoderCount=eng["encoder"],
            jpegCount=eng["jpeg"], ofaCount=eng["ofa"], memorySizeMB=p.memory_mib, name=("MIG " + p.name).encode(),
        )

    def _driver_lists_profiles(self):
        """True when the state's driver lists MIG profiles with MIG mode off (R580 on); parsed once per version."""
        version = self.state.get("driver_version") or "0"
        known = getattr(self, "_lists_profiles", None)
        if known is None or known[0] != version:
            known = (version, gpu_catalog.version_tuple(version)[0] >= PROFILES_WITHOUT_MIG_DRIVER)
            self._lists_profiles = known  # pylint: disable=attribute-defined-outside-init
        return known[1]

    def _profile_gpu(self, call, handle):
        """GPU state for profile queries. With MIG mode off, drivers before R580 answer NOT_SUPPORTED (535
        cannot list profiles then, as mig-parted documents); R580 lists them (read off a real H200 with
        580.159.04 and MIG disabled: tests/unit/plugins/module_utils/nvml/fixtures/hardware/)."""
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if model.profiles and (gpu.get("mig_mode_current") or self._driver_lists_profiles()):
            return gpu, model
        raise NvmlError(NOT_SUPPORTED, call=call)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Any, profile: int, version: int = 2) -> Any:
        call = "nvmlDeviceGetGpuInstanceProfileInfo"
        gpu, model = self._profile_gpu(call, handle)
        if not isinstance(profile, int) or profile < 0 or profile >= gpu_catalog.GI_PROFILE_COUNT:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        p = gpu_catalog.profile_by_constant(model, profile)
        if p is None:
            raise NvmlError(NOT_SUPPORTED, call=call)
        info = self._gi_profile_info(call, model, p)
        if version == 1:
            del info.name
            del info.version
        return info

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, handle: Any, profileId: int) -> Any:
        call = "nvmlDeviceGetGpuInstanceProfileInfoById"
        gpu, model = self._profile_gpu(call, handle)
        return self._gi_profile_info(call, model, self._profile_by_id(call, model, profileId))

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle: Any, profileId: int) -> List[Any]:
        call = "nvmlDeviceGetGpuInstancePossiblePlacements"
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if not model.profiles:
            raise NvmlError(NOT_SUPPORTED, call=call)
        p = self._profile_by_id(call, model, profileId)
        return [Obj(start=s, size=p.memory_slices) for s in p.placements]

    def _gi_fits(self, gpu, model, p, start):
        """NVML code why a GI of profile ``p`` at ``start`` cannot be created now, or 0."""
        if start not in p.placements:
            return INVALID_ARGUMENT
        gis = gpu["gpu_instances"]
        if sum(1 for gi in gis if gi["profile_id"] == p.profile_id) >= p.max_instances:
            return INSUFFICIENT_RESOURCES
        end = start + p.memory_slices
        used_compute = 0
        for gi in gis:
            s, e = gi["start"], gi["start"] + gi["size"]
            if s < end and start < e:
                return INSUFFICIENT_RESOURCES
            used_compute += self._gi_profile(model, gi).compute_slices
        if used_compute + p.compute_slices > model.compute_slices:
            return INSUFFICIENT_RESOURCES
        return 0

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, handle: Any, profileId: int) -> int:
        call = "nvmlDeviceGetGpuInstanceRemainingCapacity"
        gpu, model = self._profile_gpu(call, handle)
        p = self._profile_by_id(call, model, profileId)
        saved = gpu["gpu_instances"]
        trial = list(saved)
        count = 0
        try:
            for start in p.placements:
                gpu["gpu_instances"] = trial
                if self._gi_fits(gpu, model, p, start) == 0:
                    trial = trial + [{"id": -1 - count, "profile_id": p.profile_id, "start": start,
                                      "size": p.memory_slices, "compute_instances": []}]
                    count += 1
        finally:
            gpu["gpu_instances"] = saved
        return count

    def nvmlDeviceGetGpuInstances(self, handle: Any, profileId: int) -> List[Any]:
        call = "nvmlDeviceGetGpuInstances"
        gpu, model = self._profile_gpu(call, handle)
        self._profile_by_id(call, model, profileId)
        return [GpuInstanceHandle(gpu["index"], gi["id"]) for gi in gpu["gpu_instances"]
                if gi["profile_id"] == profileId]

    def nvmlDeviceGetGpuInstanceById(self, handle: Any, gpuInstanceId: int) -> Any:
        call = "nvmlDeviceGetGpuInstanceById"
        gpu, model = self._mig_gpu(call, handle)
        if self._find_gi(gpu, gpuInstanceId) is None:
            raise NvmlError(NOT_FOUND, call=call)
        return GpuInstanceHandle(gpu["index"], gpuInstanceId)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        gpu, model, gi = self._gi("nvmlGpuInstanceGetInfo", gpuInstance)
        return Obj(device=DeviceHandle(gpu["index"]), id=gi["id"], profileId=gi["profile_id"],
                   placement=Obj(start=gi["start"], size=gi["size"]))

    # -- compute instances -----------------------------------------------------------------------
    @staticmethod
    def _ci_name(model, gp, slices):
        if slices == gp.compute_slices:
            return gp.name
        return "%dc.%s" % (slices, gp.name)

    def _ci_profile(self, call, model, gp, profile):
        """CI slice count for a CI profile constant/id in a GI of profile ``gp``."""
        slices = None
        for s, const in gpu_catalog.CI_PROFILE_BY_SLICES.items():
            if const == profile:
                slices = s
        if slices is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if slices not in gpu_catalog.ci_slice_options(gp.compute_slices):
            raise NvmlError(NOT_SUPPORTED, call=call)
        return slices

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gpuInstance: Any, profile: int, engProfile: int = 0,
                                                     version: int = 2) -> Any:
        call = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        if engProfile != gpu_catalog.CI_ENGINE_PROFILE_SHARED:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        slices = self._ci_profile(call, model, gp, profile)
        sm = gp.sm or 0
        info = Obj(version=0x02000088, id=profile, sliceCount=slices, instanceCount=gp.compute_slices // slices,
                   multiprocessorCount=sm * slices // gp.compute_slices if gp.compute_slices else 0,
                   sharedCopyEngineCount=max(1, gp.compute_slices), sharedDecoderCount=0, sharedEncoderCount=0,
                   sharedJpegCount=0, sharedOfaCount=0, name=("MIG " + self._ci_name(model, gp, slices)).encode())
        if version == 1:
            del info.name
            del info.version
        return info

    nvmlGpuInstanceGetComputeInstanceProfileInfoV = nvmlGpuInstanceGetComputeInstanceProfileInfo

    @staticmethod
    def _ci_placements(gp, slices):
        return [s for s in range(0, gp.compute_slices, slices) if s + slices <= gp.compute_slices]

    @staticmethod
    def _ci_free(gi, start, slices):
        end = start + slices
        for ci in gi["compute_instances"]:
            if ci["start"] < end and start < ci["start"] + ci["slices"]:
                return False
        return True

    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(self, gpuInstance: Any, profileId: int) -> List[Obj]:
        call = "nvmlGpuInstanceGetComputeInstancePossiblePlacements"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        return [Obj(start=s, size=slices) for s in self._ci_placements(gp, slices)]

    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(self, gpuInstance: Any, profileId: int) -> int:
        call = "nvmlGpuInstanceGetComputeInstanceRemainingCapacity"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        trial = {"compute_instances": list(gi["compute_instances"])}
        count = 0
        for s in self._ci_placements(gp, slices):
            if self._ci_free(trial, s, slices):
                trial["compute_instances"].append({"start": s, "slices": slices})
                count += 1
        return count

    def nvmlGpuInstanceGetComputeInstances(self, gpuInstance: Any, profileId: int) -> List[Any]:
        call = "nvmlGpuInstanceGetComputeInstances"
        gpu, model, gi = self._gi(call, gpuInstance)
        self._ci_profile(call, model, self._gi_profile(model, gi), profileId)
        return [ComputeInstanceHandle(gpu["index"], gi["id"], ci["id"]) for ci in gi["compute_instances"]
                if ci["profile_id"] == profileId]

    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance: Any, computeInstanceId: int) -> ComputeInstanceHandle:
        call = "nvmlGpuInstanceGetComputeInstanceById"
        gpu, model, gi = self._gi(call, gpuInstance)
        if self._find_ci(gpu, gi["id"], computeInstanceId) is None:
            raise NvmlError(NOT_FOUND, call=call)
        return ComputeInstanceHandle(gpu["index"], gi["id"], computeInstanceId)

    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> Any:
        gpu, model, gi, ci = self._ci("nvmlComputeInstanceGetInfo", computeInstance)
        return Obj(device=DeviceHandle(gpu["index"]), gpuInstance=GpuInstanceHandle(gpu["index"], gi["id"]),
                   id=ci["id"], profileId=ci["profile_id"], placement=Obj(start=ci["start"], size=ci["slices"]))

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo

    # -- MIG devices -----------------------------------------------------------------------------
    def _mig_devices(self, gpu):
        return [(gi["id"], ci["id"]) for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> int:
        self._gpu("nvmlDeviceIsMigDeviceHandle", handle, mig_ok=True)
        return 1 if handle.is_mig else 0

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        gpu = self._gpu("nvmlDeviceGetMaxMigDeviceCount", handle)
        # 0 while MIG mode is off, as NVML documents and a real H200 (580.159.04) answers
        return self._model(gpu).compute_slices if gpu.get("mig_mode_current") else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        call = "nvmlDeviceGetMigDeviceHandleByIndex"
        gpu, model = self._mig_gpu(call, handle)
        devices = self._mig_devices(gpu)
        if index < 0 or index >= model.compute_slices:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if index >= len(devices):
            raise NvmlError(NOT_FOUND, call=call)
        gi, ci = devices[index]
        return DeviceHandle(gpu["index"], gi, ci)

    def _mig_device(self, call, handle):
        """``handle`` when it is a live MIG device handle; a GPU handle is INVALID_ARGUMENT, as in NVML."""
        self._gpu(call, handle, mig_ok=True)
        if not handle.is_mig:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return handle

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        return DeviceHandle(self._mig_device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", migDevice).gpu)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        return self._mig_device("nvmlDeviceGetGpuInstanceId", handle).gi

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        return self._mig_device("nvmlDeviceGetComputeInstanceId", handle).ci
