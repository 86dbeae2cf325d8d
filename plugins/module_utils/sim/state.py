# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML simulator: pynvml's function names over a JSON state file, enforcing real MIG rules.

The catalog (``gpu_catalog``) is the single source of models and MIG profiles. The state file is
read once per ``nvmlInit`` and written (atomically) after each mutating call. Its format is
documented in docs/nvml-simulator.md.

Rules enforced (NVML return codes as real NVML):

* GI/CI profile info, placements, create/list/destroy: NOT_SUPPORTED on models without MIG and
  while MIG mode is not *currently* enabled (possible placements work in any mode, as in NVML).
* GI placements: only the catalog's start slices, size = the profile's memory slices
  (INVALID_ARGUMENT otherwise); an occupied/overlapping placement, more than ``max_instances``
  of a profile, or more compute slices than the GPU has: INSUFFICIENT_RESOURCES.
* CI profiles inside a GI: the go-nvlib rule ``ci_slice_options``; placements are multiples of
  the CI size inside the GI's compute slices; overlap: INSUFFICIENT_RESOURCES.
* Destroying a GI that still has CIs or processes, or a CI with processes: IN_USE.
* MIG mode: Ampere keeps a change pending until a GPU reset (persists across reboots);
  Hopper/Blackwell apply at once (lost on GPU reset and reboot). SetMigMode is refused with
  IN_USE while processes run, and disabling is refused while GPU instances exist.
* GPU reset refused while processes run (IN_USE).
* Concurrency: every mutating call takes the host lock (``<state file>.lock``, fcntl), reads the
  state again and writes it before releasing the lock, so two runs on one simulated host lose no
  change; ``nvml.host_lock`` holds it across a whole plan-and-apply.
* Seeded random faults: ``random_faults: {rate, seed, calls, error}`` fails each mutating call (or
  each of ``calls``) with probability ``rate``, reproducibly (draw ``n`` of seed ``s`` is
  ``Random("s:n")``); ``draws`` and ``injected`` count in the state.
* Injected faults: ``{"call": <function name>, "error": <NVML error name>, "count": N, "gpu": i}``
  make that call fail N times (always without count; on every GPU without gpu).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid as uuidlib

from ansible_collections.gpuops.k8s.plugins.module_utils import gpu_catalog as cat
from ansible_collections.gpuops.k8s.plugins.module_utils.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import (
    ERROR_CODES,
    HostLock,
    GPU_IS_LOST,
    IN_USE,
    INSUFFICIENT_RESOURCES,
    INVALID_ARGUMENT,
    NOT_FOUND,
    NOT_SUPPORTED,
    RESET_REQUIRED,
    UNINITIALIZED,
    VALUE_NOT_AVAILABLE_UINT,
    NvmlError,
    error_code,
    placement_of,
)

STATE_VERSION = 1
DEFAULT_DRIVER = "550.127.08"

# CUDA driver API version reported per driver branch (nvmlSystemGetCudaDriverVersion: 12040 = 12.4).
_CUDA_BY_BRANCH = [
    (580, 13000), (575, 12090), (570, 12080), (565, 12070), (560, 12060), (555, 12050), (550, 12040),
    (545, 12030), (535, 12020), (530, 12010), (525, 12000), (520, 11080), (515, 11070), (510, 11060),
    (470, 11040), (460, 11020), (450, 11000), (0, 10020),
]

# Board power (default limit W, min limit W) per model: simulated values of the right magnitude.
_POWER = {
    "a30_24gb": (165, 100), "a100_40gb": (400, 100), "a100_80gb": (400, 100), "h100_80gb": (700, 200),
    "h100_nvl_94gb": (400, 200), "h200_141gb": (700, 200), "gh200_96gb": (900, 450), "gh200_144gb": (900, 450),
    "b200_180gb": (1000, 300), "l40s_48gb": (350, 100), "l4_24gb": (72, 40), "rtx4090_24gb": (450, 150),
    "a10_24gb": (150, 100), "t4_16gb": (70, 60),
}
# Application clocks: (memory MHz, max graphics MHz, default graphics MHz); None: not supported.
_CLOCKS = {
    "a30_24gb": (1215, 1440, 930), "a100_40gb": (1215, 1410, 1095), "a100_80gb": (1593, 1410, 1275),
    "h100_80gb": (2619, 1980, 1755), "h100_nvl_94gb": (2619, 1785, 1755), "h200_141gb": (3201, 1980, 1755),
    "gh200_96gb": (2619, 1980, 1755), "gh200_144gb": (3201, 1980, 1755), "b200_180gb": (3996, 1965, 1665),
    "l40s_48gb": (9001, 2520, 2235), "l4_24gb": (6251, 2040, 1590), "rtx4090_24gb": None,
    "a10_24gb": (6251, 1695, 1695), "t4_16gb": (5001, 1590, 585),
}
_NO_ECC = ("rtx4090_24gb",)

HEALTH_DEFAULTS = {
    "ecc_volatile_uncorrected": 0,
    "ecc_aggregate_uncorrected": 0,
    "ecc_volatile_corrected": 0,
    "ecc_aggregate_corrected": 0,
    "retired_pages_pending": False,
    "remapped_rows_pending": False,
    "remapped_rows_failure": False,
    "temperature_c": 34,
    "power_w": 71.2,
    "utilization_gpu_pct": 0,
    "utilization_memory_pct": 0,
    "lost": False,
}

# Every call the simulator implements (the names fault injection accepts).
SIM_CALLS = (
    "nvmlInit", "nvmlShutdown", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetNVMLVersion", "nvmlSystemGetProcessName",
    "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetHandleByPciBusId",
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetMigMode", "nvmlDeviceSetMigMode",
    "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlDeviceGetGpuInstanceProfileInfoV",
    "nvmlDeviceGetGpuInstanceProfileInfoById", "nvmlDeviceGetGpuInstancePossiblePlacements",
    "nvmlDeviceGetGpuInstanceRemainingCapacity", "nvmlDeviceCreateGpuInstance",
    "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlDeviceGetGpuInstances", "nvmlDeviceGetGpuInstanceById",
    "nvmlGpuInstanceGetInfo", "nvmlGpuInstanceDestroy",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo", "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
    "nvmlGpuInstanceGetComputeInstanceRemainingCapacity", "nvmlGpuInstanceGetComputeInstancePossiblePlacements",
    "nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
    "nvmlGpuInstanceGetComputeInstances", "nvmlGpuInstanceGetComputeInstanceById",
    "nvmlComputeInstanceDestroy", "nvmlComputeInstanceGetInfo", "nvmlComputeInstanceGetInfo_v2",
    "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerManagementDefaultLimit",
    "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetPersistenceMode", "nvmlDeviceSetPersistenceMode", "nvmlDeviceGetComputeMode",
    "nvmlDeviceSetComputeMode", "nvmlDeviceGetEccMode", "nvmlDeviceSetEccMode",
    "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetDefaultApplicationsClock",
    "nvmlDeviceGetSupportedMemoryClocks", "nvmlDeviceGetSupportedGraphicsClocks",
    "nvmlDeviceSetApplicationsClocks", "nvmlDeviceResetApplicationsClocks",
    "reset_gpu",
)


class Obj(object):
    """A plain struct like pynvml's (attribute access); char fields are bytes as in pynvml."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self):
        return "Obj(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))

    def __eq__(self, other):
        return isinstance(other, Obj) and self.__dict__ == other.__dict__

    def __ne__(self, other):
        return not self == other

    __hash__ = None


class DeviceHandle(object):
    __slots__ = ("gpu", "gi", "ci")

    def __init__(self, gpu, gi=None, ci=None):
        self.gpu = gpu
        self.gi = gi
        self.ci = ci

    @property
    def is_mig(self):
        return self.gi is not None

    def __repr__(self):
        if self.gi is None:
            return "<sim gpu %d>" % self.gpu
        return "<sim mig device gpu %d gi %d ci %d>" % (self.gpu, self.gi, self.ci)

    def __eq__(self, other):
        return isinstance(other, DeviceHandle) and (self.gpu, self.gi, self.ci) == (other.gpu, other.gi, other.ci)

    def __hash__(self):
        return hash((self.gpu, self.gi, self.ci))


class GpuInstanceHandle(object):
    __slots__ = ("gpu", "gi")

    def __init__(self, gpu, gi):
        self.gpu = gpu
        self.gi = gi

    def __repr__(self):
        return "<sim gpu instance %d/%d>" % (self.gpu, self.gi)

    def __eq__(self, other):
        return isinstance(other, GpuInstanceHandle) and (self.gpu, self.gi) == (other.gpu, other.gi)

    def __hash__(self):
        return hash((self.gpu, self.gi))


class ComputeInstanceHandle(object):
    __slots__ = ("gpu", "gi", "ci")

    def __init__(self, gpu, gi, ci):
        self.gpu = gpu
        self.gi = gi
        self.ci = ci

    def __repr__(self):
        return "<sim compute instance %d/%d/%d>" % (self.gpu, self.gi, self.ci)

    def __eq__(self, other):
        return isinstance(other, ComputeInstanceHandle) and \
            (self.gpu, self.gi, self.ci) == (other.gpu, other.gi, other.ci)

    def __hash__(self):
        return hash((self.gpu, self.gi, self.ci))


# --------------------------------------------------------------------------------------------------
# State construction (used by the nvml_simulator module and tests)
# --------------------------------------------------------------------------------------------------

def cuda_for_driver(driver_version):
    major = cat.version_tuple(driver_version)[0] if driver_version else 0
    for branch, cuda in _CUDA_BY_BRANCH:
        if major >= branch:
            return cuda
    return 10020


def new_gpu(index, model, nvml_name=None, rng=None):
    """State of one freshly installed GPU of ``model`` (GpuModel) at ``index``."""
    rng = rng or random
    variant = cat.variant_for(model, nvml_name)
    power = _POWER.get(model.key, (300, 100))
    clocks = _CLOCKS.get(model.key)
    gpu = {
        "index": index,
        "model": model.key,
        "name": variant.nvml_name,
        "uuid": "GPU-%s" % uuidlib.UUID(int=rng.getrandbits(128), version=4),
        "pci_device_id": "0x%04X" % variant.pci_device_id,
        "pci_bus_id": "00000000:%02X:00.0" % (0x07 + 0x10 * index if index < 15 else index),
        "serial": "%013d" % rng.randrange(10 ** 12, 10 ** 13),
        "memory_total_mib": model.total_memory_mib,
        "mig_mode_current": 0,
        "mig_mode_pending": 0,
        "gpu_instances": [],
        "processes": [],
        "health": {},
        "settings": {
            "persistence_mode": 0,
            "compute_mode": 0,
            "ecc_mode_current": 0 if model.key in _NO_ECC else 1,
            "ecc_mode_pending": 0 if model.key in _NO_ECC else 1,
            "power_limit_mw": power[0] * 1000,
            "applications_clocks": None if clocks is None else {"memory": clocks[0], "graphics": clocks[2]},
        },
    }
    return gpu


def new_state(gpus, driver_version=None, seed=None):
    """A simulated host: ``gpus`` is a list of ``{model, count}`` (model: catalog key or NVML name)."""
    rng = random.Random(seed)
    state = {
        "version": STATE_VERSION,
        "driver_version": driver_version or DEFAULT_DRIVER,
        "gpus": [],
        "faults": [],
        "boot_id": 1,
    }
    for entry in gpus:
        ref = entry.get("model")
        model = cat.find_model(ref)
        name = ref if isinstance(ref, str) and ref.lower() != model.key else None
        count = int(entry.get("count", 1))
        if count < 0:
            raise GpuOpsError("gpus: count must be 0 or more, got %s for model %s" % (count, ref))
        for dummy in range(count):
            state["gpus"].append(new_gpu(len(state["gpus"]), model, name, rng))
    return state


def load_state(path):
    try:
        with open(path) as f:
            state = json.load(f)
    except (IOError, OSError) as e:
        if not os.path.exists(path):
            raise GpuOpsError(
                "NVML simulator state file %s does not exist; create it with gpuops.k8s.nvml_simulator "
                "(or unset 'simulator' / $GPUOPS_NVML_SIMULATOR to use the real NVML)" % path, path=path)
        raise GpuOpsError("cannot read NVML simulator state file %s: %s" % (path, e), path=path)
    except ValueError as e:
        raise GpuOpsError("NVML simulator state file %s is not valid JSON: %s" % (path, e), path=path)
    if not isinstance(state, dict) or not isinstance(state.get("gpus"), list):
        raise GpuOpsError("NVML simulator state file %s has no 'gpus' list; recreate it with "
                          "gpuops.k8s.nvml_simulator (reset: true)" % path, path=path)
    if state.get("version", STATE_VERSION) != STATE_VERSION:
        raise GpuOpsError("NVML simulator state file %s has version %s; this collection reads version %s"
                          % (path, state.get("version"), STATE_VERSION), path=path)
    validate_state(state, path)
    return state


class _Shape(object):
    """Checks one state file's shape; every error names the file, the path and the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, field, what):
        raise GpuOpsError("NVML simulator state file %s: %s %s; fix the file or recreate it with "
                          "gpuops.k8s.nvml_simulator (reset: true)" % (self.path, field, what),
                          path=self.path, field=field)

    def get(self, obj, key, where, kind, required=True, nullable=False):
        field = "%s.%s" % (where, key) if where else key
        if key not in obj:
            if required:
                self.fail(field, "is missing (%s)" % _KINDS[kind])
            return None
        value = obj[key]
        if value is None and nullable:
            return None
        self.check(value, field, kind)
        return value

    def check(self, value, field, kind):
        ok = {
            "int": isinstance(value, int) and not isinstance(value, bool),
            "mode": isinstance(value, int) and value in (0, 1),
            "str": isinstance(value, str),
            "list": isinstance(value, list),
            "dict": isinstance(value, dict),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
            "code": isinstance(value, (str, int)) and not isinstance(value, bool),
        }[kind]
        if not ok:
            self.fail(field, "must be %s, got %s" % (_KINDS[kind], json.dumps(value)[:60]))


_KINDS = {"int": "an integer", "mode": "0 or 1", "str": "a string", "list": "a list", "dict": "a mapping",
          "number": "a number", "code": "an NVML error name or code"}


def validate_state(state, path):
    """Raise GpuOpsError naming the path and field where ``state`` does not have the documented shape."""
    sh = _Shape(path)
    sh.get(state, "driver_version", "", "str", required=False, nullable=True)
    sh.get(state, "cuda_driver_version", "", "int", required=False, nullable=True)
    sh.get(state, "boot_id", "", "int", required=False)
    gpus = state["gpus"]
    for i, gpu in enumerate(gpus):
        where = "gpus[%d]" % i
        sh.check(gpu, where, "dict")
        if sh.get(gpu, "index", where, "int") != i:
            sh.fail(where + ".index", "must be %d (its position in gpus), got %s" % (i, gpu["index"]))
        model = sh.get(gpu, "model", where, "str")
        if cat.lookup_model(model) is None:
            sh.fail(where + ".model", "is %r, not a catalog model; valid models: %s" % (model, ", ".join(cat.model_keys())))
        for key in ("name", "uuid", "pci_device_id", "pci_bus_id"):
            sh.get(gpu, key, where, "str")
        sh.get(gpu, "serial", where, "str", required=False)
        sh.get(gpu, "memory_total_mib", where, "int")
        sh.get(gpu, "mig_mode_current", where, "mode", required=False)
        sh.get(gpu, "mig_mode_pending", where, "mode", required=False)
        for key in ("health", "settings"):
            sh.get(gpu, key, where, "dict", required=False)
        for j, gi in enumerate(sh.get(gpu, "gpu_instances", where, "list")):
            gwhere = "%s.gpu_instances[%d]" % (where, j)
            sh.check(gi, gwhere, "dict")
            for key in ("id", "profile_id", "start", "size"):
                sh.get(gi, key, gwhere, "int")
            for k, ci in enumerate(sh.get(gi, "compute_instances", gwhere, "list")):
                cwhere = "%s.compute_instances[%d]" % (gwhere, k)
                sh.check(ci, cwhere, "dict")
                for key in ("id", "profile_id", "slices", "start"):
                    sh.get(ci, key, cwhere, "int")
                sh.get(ci, "uuid", cwhere, "str", required=False)
        for k, proc in enumerate(sh.get(gpu, "processes", where, "list", required=False) or []):
            pwhere = "%s.processes[%d]" % (where, k)
            sh.check(proc, pwhere, "dict")
            sh.get(proc, "pid", pwhere, "int")
            sh.get(proc, "name", pwhere, "str", required=False, nullable=True)
            for key in ("gpu_instance_id", "compute_instance_id"):
                sh.get(proc, key, pwhere, "int", required=False, nullable=True)
            sh.get(proc, "used_memory_mib", pwhere, "number", required=False)
    spec = sh.get(state, "random_faults", "", "dict", required=False, nullable=True)
    if spec is not None:
        rate = sh.get(spec, "rate", "random_faults", "number")
        if not 0 <= rate <= 1:
            sh.fail("random_faults.rate", "must be between 0 and 1, got %s" % rate)
        sh.get(spec, "seed", "random_faults", "code", required=False)
        sh.get(spec, "error", "random_faults", "code", required=False)
        for key in ("draws", "injected"):
            sh.get(spec, key, "random_faults", "int", required=False)
        calls = sh.get(spec, "calls", "random_faults", "list", required=False, nullable=True) or []
        for i, call in enumerate(calls):
            if call not in SIM_CALLS:
                sh.fail("random_faults.calls[%d]" % i, "is %r, not a call the simulator implements" % (call,))
    faults = sh.get(state, "faults", "", "list", required=False, nullable=True) or []
    for i, fault in enumerate(faults):
        where = "faults[%d]" % i
        sh.check(fault, where, "dict")
        sh.get(fault, "call", where, "str")
        sh.get(fault, "error", where, "code", required=False)
        sh.get(fault, "count", where, "int", required=False, nullable=True)
        gpu = sh.get(fault, "gpu", where, "int", required=False, nullable=True)
        if gpu is not None and not 0 <= gpu < len(gpus):
            sh.fail(where + ".gpu", "is %d; the host has GPUs 0-%d" % (gpu, len(gpus) - 1))


def lock_path(path):
    """The host lock of a simulated host: a file beside its state file."""
    return path + ".lock"


def save_state(path, state):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    fd, tmp = tempfile.mkstemp(prefix=".nvml-sim-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def gi_swizzle_id(memory_slices, start, size):
    """GPU instance id as the driver assigns it: a binary tree over the memory slices.

    With 8 memory slices: the whole GPU is 0, halves 1-2, quarters 3-6, eighths 7-14 (A100/H100 show
    GI ids 7-13 for 1g instances, 1-2 for 3g, 0 for 7g).
    """
    return memory_slices // size - 1 + start // size


def _health(gpu, key):
    h = gpu.get("health") or {}
    return h.get(key, HEALTH_DEFAULTS[key])


def reboot_gpu_state(gpu, model):
    """What a host reboot does to one GPU."""
    if cat.mig_mode_persistent(model):
        gpu["mig_mode_current"] = gpu.get("mig_mode_pending", 0)
    else:
        gpu["mig_mode_current"] = 0
        gpu["mig_mode_pending"] = 0
    gpu["gpu_instances"] = []
    gpu["processes"] = []
    settings = gpu.setdefault("settings", {})
    settings["ecc_mode_current"] = settings.get("ecc_mode_pending", settings.get("ecc_mode_current", 0))
    settings["persistence_mode"] = 0
    settings["compute_mode"] = 0
    power = _POWER.get(model.key, (300, 100))
    settings["power_limit_mw"] = power[0] * 1000
    clocks = _CLOCKS.get(model.key)
    settings["applications_clocks"] = None if clocks is None else {"memory": clocks[0], "graphics": clocks[2]}
    health = gpu.setdefault("health", {})
    health.pop("ecc_volatile_uncorrected", None)
    health.pop("ecc_volatile_corrected", None)


def reboot_state(state):
    """A simulated host reboot: pending modes applied on Ampere, MIG mode lost on Hopper+, no instances."""
    for gpu in state["gpus"]:
        reboot_gpu_state(gpu, cat.find_model(gpu["model"]))
    state["boot_id"] = int(state.get("boot_id", 1)) + 1
    return state


# --------------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------------

class SimBackend(object):
    """pynvml's function names over a JSON state file."""

    kind = "simulator"

    def __init__(self, path):
        self.path = path
        self.state = None
        self.cache = {}
        self._models = {}
        self._profiles = {}
        self._lock = None

    # -- plumbing --------------------------------------------------------------------------------
    def host_lock(self, what=None):
        if self._lock is None:
            self._lock = HostLock(lock_path(self.path), what=what)
        elif what and not self._lock.held:
            self._lock.what = what
        return self._lock

    def locked(self):
        """The host lock was just taken: read the state again (another run may have changed it)."""
        if self.state is not None:
            self.state = load_state(self.path)
            self.cache.clear()

    def _mutation(self):
        """Context of one mutating call: the host lock held, the state fresh."""
        return _Mutation(self)

    def _save(self):
        save_state(self.path, self.state)

    @staticmethod
    def _matching_fault(faults, call, gpu):
        for i, f in enumerate(faults):
            if f.get("call") != call:
                continue
            if f.get("gpu") is not None and gpu is not None and int(f["gpu"]) != gpu:
                continue
            if f.get("gpu") is not None and gpu is None and call not in ("nvmlInit",):
                continue
            count = f.get("count")
            if count is not None and int(count) <= 0:
                continue
            return i, f
        return None, None

    def _random_fault(self, call):
        """Seeded random faults (``random_faults`` in the state): draw ``n`` of seed ``s`` fails when
        ``Random("s:n").random() < rate``; the draw count and the faults injected are kept in the state."""
        spec = self.state.get("random_faults")
        if not spec or call not in (spec.get("calls") or MUTATING_CALLS):
            return
        with self._mutation():
            spec = self.state.get("random_faults") or {}
            draw = int(spec.get("draws", 0))
            spec["draws"] = draw + 1
            spec.setdefault("injected", 0)
            if random.Random("%s:%d" % (spec.get("seed", 0), draw)).random() >= float(spec.get("rate", 0)):
                return  # saved with the change this call makes
            spec["injected"] = int(spec.get("injected", 0)) + 1
            self._save()
        raise NvmlError(error_code(spec.get("error") or "NVML_ERROR_UNKNOWN"), call=call, injected=True,
                        random_fault=True)

    def _fault(self, call, gpu=None):
        i, f = self._matching_fault(self.state.get("faults") or [], call, gpu)
        if f is None:
            self._random_fault(call)
            return
        code = error_code(f.get("error", "NVML_ERROR_UNKNOWN"))
        if f.get("count") is not None:
            # a counted fault is used up: change the count under the lock, in the state as it is now
            with self._mutation():
                faults = self.state.get("faults") or []
                i, f = self._matching_fault(faults, call, gpu)
                if f is not None:
                    count = int(f["count"])
                    if count == 1:
                        faults.pop(i)
                    else:
                        f["count"] = count - 1
                    self._save()
        raise NvmlError(code, call=call, injected=True)

    def _enter(self, call, gpu=None):
        if self.state is None:
            raise NvmlError(UNINITIALIZED, call=call)
        self._fault(call, gpu)

    def _gpu(self, call, handle, mig_ok=False):
        """State dict of the GPU behind a device handle (faults and lost GPUs checked)."""
        if not isinstance(handle, DeviceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        self._enter(call, handle.gpu)
        gpus = self.state["gpus"]
        if handle.gpu < 0 or handle.gpu >= len(gpus):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu = gpus[handle.gpu]
        if _health(gpu, "lost"):
            raise NvmlError(GPU_IS_LOST, call=call)
        if handle.is_mig and not mig_ok:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if handle.is_mig and self._find_ci(gpu, handle.gi, handle.ci) is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu

    def _model(self, gpu):
        key = gpu["model"]
        if key not in self._models:
            self._models[key] = cat.find_model(key)
        return self._models[key]

    def _mig_gpu(self, call, handle):
        """GPU state for GI/CI calls: MIG-capable and MIG mode currently enabled."""
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if not model.profiles or not gpu.get("mig_mode_current"):
            raise NvmlError(NOT_SUPPORTED, call=call)
        return gpu, model

    def _profile_by_id(self, call, model, profile_id):
        for p in model.profiles:
            if p.profile_id == profile_id:
                return p
        raise NvmlError(INVALID_ARGUMENT, call=call)

    @staticmethod
    def _find_gi(gpu, gi_id):
        for gi in gpu["gpu_instances"]:
            if gi["id"] == gi_id:
                return gi
        return None

    @staticmethod
    def _find_ci(gpu, gi_id, ci_id):
        for gi in gpu["gpu_instances"]:
            if gi["id"] == gi_id:
                for ci in gi["compute_instances"]:
                    if ci["id"] == ci_id:
                        return ci
        return None

    def _gi(self, call, gi_handle):
        if not isinstance(gi_handle, GpuInstanceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu, model = self._mig_gpu(call, DeviceHandle(gi_handle.gpu))
        gi = self._find_gi(gpu, gi_handle.gi)
        if gi is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu, model, gi

    def _ci(self, call, ci_handle):
        if not isinstance(ci_handle, ComputeInstanceHandle):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu, model, gi = self._gi(call, GpuInstanceHandle(ci_handle.gpu, ci_handle.gi))
        ci = self._find_ci(gpu, ci_handle.gi, ci_handle.ci)
        if ci is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return gpu, model, gi, ci

    def _gi_profile(self, model, gi):
        for p in model.profiles:
            if p.profile_id == gi["profile_id"]:
                return p
        raise GpuOpsError("simulator state: GPU instance %s has unknown profile id %s" % (gi["id"], gi["profile_id"]))

    # -- system ----------------------------------------------------------------------------------
    def nvmlInit(self):
        self.state = load_state(self.path)
        try:
            self._fault("nvmlInit")
        except NvmlError:
            self.state = None
            raise

    def nvmlInitWithFlags(self, flags=0):
        self.nvmlInit()

    def nvmlShutdown(self):
        self._enter("nvmlShutdown")
        self.state = None

    def nvmlSystemGetDriverVersion(self):
        self._enter("nvmlSystemGetDriverVersion")
        return self.state.get("driver_version") or DEFAULT_DRIVER

    def nvmlSystemGetCudaDriverVersion(self):
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(self.state.get("cuda_driver_version") or cuda_for_driver(self.state.get("driver_version")))

    def nvmlSystemGetCudaDriverVersion_v2(self):
        self._enter("nvmlSystemGetCudaDriverVersion_v2")
        return int(self.state.get("cuda_driver_version") or cuda_for_driver(self.state.get("driver_version")))

    def nvmlSystemGetNVMLVersion(self):
        self._enter("nvmlSystemGetNVMLVersion")
        major = cat.version_tuple(self.state.get("driver_version") or DEFAULT_DRIVER)[0]
        return "%d.%s" % (major // 10 + 1 if major < 100 else 12, self.state.get("driver_version") or DEFAULT_DRIVER)

    def nvmlSystemGetProcessName(self, pid):
        self._enter("nvmlSystemGetProcessName")
        for gpu in self.state["gpus"]:
            for p in gpu.get("processes", []):
                if int(p["pid"]) == int(pid):
                    return p.get("name") or "python"
        raise NvmlError(NOT_FOUND, call="nvmlSystemGetProcessName")

    # -- devices ---------------------------------------------------------------------------------
    def nvmlDeviceGetCount(self):
        self._enter("nvmlDeviceGetCount")
        return len(self.state["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index):
        self._enter("nvmlDeviceGetHandleByIndex", index)
        if not isinstance(index, int) or index < 0 or index >= len(self.state["gpus"]):
            raise NvmlError(INVALID_ARGUMENT, call="nvmlDeviceGetHandleByIndex")
        return DeviceHandle(index)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        self._enter("nvmlDeviceGetHandleByUUID")
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        for gpu in self.state["gpus"]:
            if gpu["uuid"] == uuid:
                return DeviceHandle(gpu["index"])
            for gi in gpu["gpu_instances"]:
                for ci in gi["compute_instances"]:
                    if ci.get("uuid") == uuid:
                        return DeviceHandle(gpu["index"], gi["id"], ci["id"])
        raise NvmlError(NOT_FOUND, call="nvmlDeviceGetHandleByUUID")

    def nvmlDeviceGetHandleByPciBusId(self, bus_id):
        self._enter("nvmlDeviceGetHandleByPciBusId")
        bus_id = (bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)).lower()
        for gpu in self.state["gpus"]:
            if gpu["pci_bus_id"].lower() == bus_id or gpu["pci_bus_id"].lower()[4:] == bus_id:
                return DeviceHandle(gpu["index"])
        raise NvmlError(NOT_FOUND, call="nvmlDeviceGetHandleByPciBusId")

    def nvmlDeviceGetName(self, handle):
        gpu = self._gpu("nvmlDeviceGetName", handle, mig_ok=True)
        if handle.is_mig:
            model = self._model(gpu)
            gi = self._find_gi(gpu, handle.gi)
            ci = self._find_ci(gpu, handle.gi, handle.ci)
            return "%s MIG %s" % (gpu["name"], self._ci_name(model, self._gi_profile(model, gi), ci["slices"]))
        return gpu["name"]

    def nvmlDeviceGetUUID(self, handle):
        gpu = self._gpu("nvmlDeviceGetUUID", handle, mig_ok=True)
        if handle.is_mig:
            return self._find_ci(gpu, handle.gi, handle.ci)["uuid"]
        return gpu["uuid"]

    def nvmlDeviceGetSerial(self, handle):
        gpu = self._gpu("nvmlDeviceGetSerial", handle)
        return gpu.get("serial", "")

    def nvmlDeviceGetPciInfo(self, handle):
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        dev = int(gpu["pci_device_id"], 16)
        bus_id = gpu["pci_bus_id"]
        domain, bus, rest = bus_id.split(":")
        return Obj(
            busId=bus_id.encode(), busIdLegacy=bus_id[4:].encode(), domain=int(domain, 16), bus=int(bus, 16),
            device=int(rest.split(".")[0], 16), pciDeviceId=(dev << 16) | cat.NVIDIA_VENDOR_ID,
            pciSubSystemId=(0x1463 << 16) | cat.NVIDIA_VENDOR_ID,
        )

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu("nvmlDeviceGetMemoryInfo", handle, mig_ok=True)
        if handle.is_mig:
            model = self._model(gpu)
            gi = self._find_gi(gpu, handle.gi)
            total = self._gi_profile(model, gi).memory_mib * 1024 * 1024
            used = 0
        else:
            total = int(gpu["memory_total_mib"]) * 1024 * 1024
            used = 0 if gpu.get("mig_mode_current") else 512 * 1024 * 1024
        used += sum(int(p.get("used_memory_mib", 0)) for p in self._procs(gpu, handle)) * 1024 * 1024
        used = min(used, total)
        return Obj(total=total, free=total - used, used=used)

    # -- MIG mode --------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, handle):
        gpu = self._gpu("nvmlDeviceGetMigMode", handle)
        if not self._model(gpu).profiles:
            raise NvmlError(NOT_SUPPORTED, call="nvmlDeviceGetMigMode")
        return [int(gpu.get("mig_mode_current", 0)), int(gpu.get("mig_mode_pending", 0))]

    def nvmlDeviceSetMigMode(self, handle, mode):
        call = "nvmlDeviceSetMigMode"
        gpu = self._gpu(call, handle)
        model = self._model(gpu)
        if not model.profiles:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if mode not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if gpu.get("processes"):
            raise NvmlError(IN_USE, call=call)
        if mode == 0 and gpu.get("gpu_instances"):
            raise NvmlError(IN_USE, call=call)
        if cat.mig_mode_needs_reset(model):
            gpu["mig_mode_pending"] = mode
            status = 0 if gpu.get("mig_mode_current", 0) == mode else RESET_REQUIRED
        else:
            gpu["mig_mode_pending"] = mode
            gpu["mig_mode_current"] = mode
            status = 0
        self._save()
        return status

    # -- GPU instance profiles -------------------------------------------------------------------
    def _gi_profile_info(self, call, model, p):
        eng = cat.profile_engines(model, p)
        return Obj(
            version=0x02000098, id=p.profile_id, isP2pSupported=0, sliceCount=p.compute_slices,
            instanceCount=p.max_instances, multiprocessorCount=p.sm or 0,
            copyEngineCount=eng["copy"], decoderCount=eng["decoder"], encoderCount=eng["encoder"],
            jpegCount=eng["jpeg"], ofaCount=eng["ofa"], memorySizeMB=p.memory_mib, name=("MIG " + p.name).encode(),
        )

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle, profile, version=2):
        call = "nvmlDeviceGetGpuInstanceProfileInfo"
        gpu, model = self._mig_gpu(call, handle)
        if not isinstance(profile, int) or profile < 0 or profile >= cat.GI_PROFILE_COUNT:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        p = cat.profile_by_constant(model, profile)
        if p is None:
            raise NvmlError(NOT_SUPPORTED, call=call)
        info = self._gi_profile_info(call, model, p)
        if version == 1:
            del info.name
            del info.version
        return info

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, handle, profileId):
        call = "nvmlDeviceGetGpuInstanceProfileInfoById"
        gpu, model = self._mig_gpu(call, handle)
        return self._gi_profile_info(call, model, self._profile_by_id(call, model, profileId))

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, handle, profileId):
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

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, handle, profileId):
        call = "nvmlDeviceGetGpuInstanceRemainingCapacity"
        gpu, model = self._mig_gpu(call, handle)
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

    def _create_gi(self, call, gpu, model, p, start):
        reason = self._gi_fits(gpu, model, p, start)
        if reason:
            raise NvmlError(reason, call=call)
        gi_id = gi_swizzle_id(model.memory_slices, start, p.memory_slices)
        gpu["gpu_instances"].append({
            "id": gi_id, "profile_id": p.profile_id, "start": start, "size": p.memory_slices,
            "compute_instances": [],
        })
        gpu["gpu_instances"].sort(key=lambda g: g["id"])
        self._save()
        return GpuInstanceHandle(gpu["index"], gi_id)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, handle, profileId, placement):
        call = "nvmlDeviceCreateGpuInstanceWithPlacement"
        gpu, model = self._mig_gpu(call, handle)
        p = self._profile_by_id(call, model, profileId)
        try:
            start, size = placement_of(placement)
        except (KeyError, AttributeError, TypeError, ValueError, IndexError):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if size != p.memory_slices:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._create_gi(call, gpu, model, p, start)

    def nvmlDeviceCreateGpuInstance(self, handle, profileId):
        call = "nvmlDeviceCreateGpuInstance"
        gpu, model = self._mig_gpu(call, handle)
        p = self._profile_by_id(call, model, profileId)
        for start in p.placements:
            if self._gi_fits(gpu, model, p, start) == 0:
                return self._create_gi(call, gpu, model, p, start)
        raise NvmlError(INSUFFICIENT_RESOURCES, call=call)

    def nvmlDeviceGetGpuInstances(self, handle, profileId):
        call = "nvmlDeviceGetGpuInstances"
        gpu, model = self._mig_gpu(call, handle)
        self._profile_by_id(call, model, profileId)
        return [GpuInstanceHandle(gpu["index"], gi["id"]) for gi in gpu["gpu_instances"]
                if gi["profile_id"] == profileId]

    def nvmlDeviceGetGpuInstanceById(self, handle, gpuInstanceId):
        call = "nvmlDeviceGetGpuInstanceById"
        gpu, model = self._mig_gpu(call, handle)
        if self._find_gi(gpu, gpuInstanceId) is None:
            raise NvmlError(NOT_FOUND, call=call)
        return GpuInstanceHandle(gpu["index"], gpuInstanceId)

    def nvmlGpuInstanceGetInfo(self, gpuInstance):
        gpu, model, gi = self._gi("nvmlGpuInstanceGetInfo", gpuInstance)
        return Obj(device=DeviceHandle(gpu["index"]), id=gi["id"], profileId=gi["profile_id"],
                   placement=Obj(start=gi["start"], size=gi["size"]))

    def nvmlGpuInstanceDestroy(self, gpuInstance):
        call = "nvmlGpuInstanceDestroy"
        gpu, model, gi = self._gi(call, gpuInstance)
        if gi["compute_instances"] or any(p.get("gpu_instance_id") == gi["id"] for p in gpu.get("processes", [])):
            raise NvmlError(IN_USE, call=call)
        gpu["gpu_instances"] = [g for g in gpu["gpu_instances"] if g["id"] != gi["id"]]
        self._save()
        return 0

    # -- compute instances -----------------------------------------------------------------------
    @staticmethod
    def _ci_name(model, gp, slices):
        if slices == gp.compute_slices:
            return gp.name
        return "%dc.%s" % (slices, gp.name)

    def _ci_profile(self, call, model, gp, profile):
        """CI slice count for a CI profile constant/id in a GI of profile ``gp``."""
        slices = None
        for s, const in cat.CI_PROFILE_BY_SLICES.items():
            if const == profile:
                slices = s
        if slices is None:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if slices not in cat.ci_slice_options(gp.compute_slices):
            raise NvmlError(NOT_SUPPORTED, call=call)
        return slices

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gpuInstance, profile, engProfile=0, version=2):
        call = "nvmlGpuInstanceGetComputeInstanceProfileInfo"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        if engProfile != cat.CI_ENGINE_PROFILE_SHARED:
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

    def nvmlGpuInstanceGetComputeInstancePossiblePlacements(self, gpuInstance, profileId):
        call = "nvmlGpuInstanceGetComputeInstancePossiblePlacements"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        return [Obj(start=s, size=slices) for s in self._ci_placements(gp, slices)]

    def nvmlGpuInstanceGetComputeInstanceRemainingCapacity(self, gpuInstance, profileId):
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

    def _create_ci(self, call, gpu, model, gi, slices, profile, start):
        if not self._ci_free(gi, start, slices):
            raise NvmlError(INSUFFICIENT_RESOURCES, call=call)
        used = set(ci["id"] for ci in gi["compute_instances"])
        ci_id = 0
        while ci_id in used:
            ci_id += 1
        gi["compute_instances"].append({
            "id": ci_id, "profile_id": profile, "slices": slices, "start": start,
            "uuid": "MIG-%s" % uuidlib.uuid4(),
        })
        gi["compute_instances"].sort(key=lambda c: c["id"])
        self._save()
        return ComputeInstanceHandle(gpu["index"], gi["id"], ci_id)

    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance, profileId):
        call = "nvmlGpuInstanceCreateComputeInstance"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        for s in self._ci_placements(gp, slices):
            if self._ci_free(gi, s, slices):
                return self._create_ci(call, gpu, model, gi, slices, profileId, s)
        raise NvmlError(INSUFFICIENT_RESOURCES, call=call)

    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(self, gpuInstance, profileId, placement):
        call = "nvmlGpuInstanceCreateComputeInstanceWithPlacement"
        gpu, model, gi = self._gi(call, gpuInstance)
        gp = self._gi_profile(model, gi)
        slices = self._ci_profile(call, model, gp, profileId)
        try:
            start, size = placement_of(placement)
        except (KeyError, AttributeError, TypeError, ValueError, IndexError):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if size != slices or start not in self._ci_placements(gp, slices):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._create_ci(call, gpu, model, gi, slices, profileId, start)

    def nvmlGpuInstanceGetComputeInstances(self, gpuInstance, profileId):
        call = "nvmlGpuInstanceGetComputeInstances"
        gpu, model, gi = self._gi(call, gpuInstance)
        self._ci_profile(call, model, self._gi_profile(model, gi), profileId)
        return [ComputeInstanceHandle(gpu["index"], gi["id"], ci["id"]) for ci in gi["compute_instances"]
                if ci["profile_id"] == profileId]

    def nvmlGpuInstanceGetComputeInstanceById(self, gpuInstance, computeInstanceId):
        call = "nvmlGpuInstanceGetComputeInstanceById"
        gpu, model, gi = self._gi(call, gpuInstance)
        if self._find_ci(gpu, gi["id"], computeInstanceId) is None:
            raise NvmlError(NOT_FOUND, call=call)
        return ComputeInstanceHandle(gpu["index"], gi["id"], computeInstanceId)

    def nvmlComputeInstanceGetInfo(self, computeInstance):
        gpu, model, gi, ci = self._ci("nvmlComputeInstanceGetInfo", computeInstance)
        return Obj(device=DeviceHandle(gpu["index"]), gpuInstance=GpuInstanceHandle(gpu["index"], gi["id"]),
                   id=ci["id"], profileId=ci["profile_id"], placement=Obj(start=ci["start"], size=ci["slices"]))

    nvmlComputeInstanceGetInfo_v2 = nvmlComputeInstanceGetInfo

    def nvmlComputeInstanceDestroy(self, computeInstance):
        call = "nvmlComputeInstanceDestroy"
        gpu, model, gi, ci = self._ci(call, computeInstance)
        for p in gpu.get("processes", []):
            if p.get("gpu_instance_id") == gi["id"] and p.get("compute_instance_id") in (None, ci["id"]):
                raise NvmlError(IN_USE, call=call)
        gi["compute_instances"] = [c for c in gi["compute_instances"] if c["id"] != ci["id"]]
        self._save()
        return 0

    # -- MIG devices -----------------------------------------------------------------------------
    def _mig_devices(self, gpu):
        return [(gi["id"], ci["id"]) for gi in gpu["gpu_instances"] for ci in gi["compute_instances"]]

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        self._gpu("nvmlDeviceIsMigDeviceHandle", handle, mig_ok=True)
        return 1 if handle.is_mig else 0

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        gpu = self._gpu("nvmlDeviceGetMaxMigDeviceCount", handle)
        return self._model(gpu).compute_slices

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, index):
        call = "nvmlDeviceGetMigDeviceHandleByIndex"
        gpu, model = self._mig_gpu(call, handle)
        devices = self._mig_devices(gpu)
        if index < 0 or index >= model.compute_slices:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        if index >= len(devices):
            raise NvmlError(NOT_FOUND, call=call)
        gi, ci = devices[index]
        return DeviceHandle(gpu["index"], gi, ci)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice):
        call = "nvmlDeviceGetDeviceHandleFromMigDeviceHandle"
        self._gpu(call, migDevice, mig_ok=True)
        if not migDevice.is_mig:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return DeviceHandle(migDevice.gpu)

    def nvmlDeviceGetGpuInstanceId(self, handle):
        call = "nvmlDeviceGetGpuInstanceId"
        self._gpu(call, handle, mig_ok=True)
        if not handle.is_mig:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return handle.gi

    def nvmlDeviceGetComputeInstanceId(self, handle):
        call = "nvmlDeviceGetComputeInstanceId"
        self._gpu(call, handle, mig_ok=True)
        if not handle.is_mig:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return handle.ci

    # -- processes -------------------------------------------------------------------------------
    def _procs(self, gpu, handle):
        procs = gpu.get("processes", [])
        if handle.is_mig:
            procs = [p for p in procs if _in_instance(p, handle)]
        return procs

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu("nvmlDeviceGetComputeRunningProcesses", handle, mig_ok=True)
        out = []
        for p in self._procs(gpu, handle):
            gi = p.get("gpu_instance_id")
            ci = p.get("compute_instance_id")
            if gi is not None and ci is None:
                g = self._find_gi(gpu, gi)
                cis = g["compute_instances"] if g else []
                ci = cis[0]["id"] if cis else None
            out.append(Obj(
                pid=int(p["pid"]), usedGpuMemory=int(p.get("used_memory_mib", 0)) * 1024 * 1024,
                gpuInstanceId=VALUE_NOT_AVAILABLE_UINT if gi is None else gi,
                computeInstanceId=VALUE_NOT_AVAILABLE_UINT if ci is None else ci,
            ))
        return out

    nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses

    # -- health ----------------------------------------------------------------------------------
    def nvmlDeviceGetTotalEccErrors(self, handle, errorType, counterType):
        call = "nvmlDeviceGetTotalEccErrors"
        gpu = self._gpu(call, handle)
        if gpu["model"] in _NO_ECC or not gpu.get("settings", {}).get("ecc_mode_current", 1):
            raise NvmlError(NOT_SUPPORTED, call=call)
        if errorType not in (0, 1) or counterType not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        key = "ecc_%s_%s" % ("volatile" if counterType == 0 else "aggregate",
                             "corrected" if errorType == 0 else "uncorrected")
        return int(_health(gpu, key))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        gpu = self._gpu("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        return 1 if _health(gpu, "retired_pages_pending") else 0

    def nvmlDeviceGetRemappedRows(self, handle):
        call = "nvmlDeviceGetRemappedRows"
        gpu = self._gpu(call, handle)
        if gpu["model"] in _NO_ECC:
            raise NvmlError(NOT_SUPPORTED, call=call)
        failure = 1 if _health(gpu, "remapped_rows_failure") else 0
        pending = 1 if _health(gpu, "remapped_rows_pending") else 0
        return (0, int(_health(gpu, "ecc_aggregate_uncorrected")), pending, failure)

    def nvmlDeviceGetTemperature(self, handle, sensor=0):
        gpu = self._gpu("nvmlDeviceGetTemperature", handle)
        if sensor != 0:
            raise NvmlError(INVALID_ARGUMENT, call="nvmlDeviceGetTemperature")
        return int(_health(gpu, "temperature_c"))

    def nvmlDeviceGetPowerUsage(self, handle):
        gpu = self._gpu("nvmlDeviceGetPowerUsage", handle)
        return int(round(float(_health(gpu, "power_w")) * 1000))

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        return Obj(gpu=int(_health(gpu, "utilization_gpu_pct")), memory=int(_health(gpu, "utilization_memory_pct")))

    # -- settings (gpu_settings) -----------------------------------------------------------------
    def _settings(self, call, handle):
        gpu = self._gpu(call, handle)
        return gpu, gpu.setdefault("settings", {})

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        gpu, s = self._settings("nvmlDeviceGetPowerManagementLimit", handle)
        return int(s.get("power_limit_mw", _POWER.get(gpu["model"], (300, 100))[0] * 1000))

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit

    def nvmlDeviceGetPowerManagementDefaultLimit(self, handle):
        gpu = self._gpu("nvmlDeviceGetPowerManagementDefaultLimit", handle)
        return _POWER.get(gpu["model"], (300, 100))[0] * 1000

    def nvmlDeviceGetPowerManagementLimitConstraints(self, handle):
        gpu = self._gpu("nvmlDeviceGetPowerManagementLimitConstraints", handle)
        default, minimum = _POWER.get(gpu["model"], (300, 100))
        return [minimum * 1000, default * 1000]

    def nvmlDeviceSetPowerManagementLimit(self, handle, limit):
        call = "nvmlDeviceSetPowerManagementLimit"
        gpu, s = self._settings(call, handle)
        default, minimum = _POWER.get(gpu["model"], (300, 100))
        if not isinstance(limit, int) or limit < minimum * 1000 or limit > default * 1000:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["power_limit_mw"] = limit
        self._save()

    def nvmlDeviceGetPersistenceMode(self, handle):
        gpu, s = self._settings("nvmlDeviceGetPersistenceMode", handle)
        return int(s.get("persistence_mode", 0))

    def nvmlDeviceSetPersistenceMode(self, handle, mode):
        call = "nvmlDeviceSetPersistenceMode"
        gpu, s = self._settings(call, handle)
        if mode not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["persistence_mode"] = mode
        self._save()

    def nvmlDeviceGetComputeMode(self, handle):
        gpu, s = self._settings("nvmlDeviceGetComputeMode", handle)
        return int(s.get("compute_mode", 0))

    def nvmlDeviceSetComputeMode(self, handle, mode):
        call = "nvmlDeviceSetComputeMode"
        gpu, s = self._settings(call, handle)
        if mode == 1:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if mode not in (0, 2, 3):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["compute_mode"] = mode
        self._save()

    def nvmlDeviceGetEccMode(self, handle):
        call = "nvmlDeviceGetEccMode"
        gpu, s = self._settings(call, handle)
        if gpu["model"] in _NO_ECC:
            raise NvmlError(NOT_SUPPORTED, call=call)
        return [int(s.get("ecc_mode_current", 1)), int(s.get("ecc_mode_pending", 1))]

    def nvmlDeviceSetEccMode(self, handle, mode):
        call = "nvmlDeviceSetEccMode"
        gpu, s = self._settings(call, handle)
        if gpu["model"] in _NO_ECC:
            raise NvmlError(NOT_SUPPORTED, call=call)
        if mode not in (0, 1):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["ecc_mode_pending"] = mode
        self._save()

    def _clocks(self, call, handle):
        gpu, s = self._settings(call, handle)
        clocks = _CLOCKS.get(gpu["model"])
        if clocks is None:
            raise NvmlError(NOT_SUPPORTED, call=call)
        return gpu, s, clocks

    @staticmethod
    def _graphics_steps(clocks):
        return list(range(clocks[1], 209, -15))

    def nvmlDeviceGetApplicationsClock(self, handle, clock_type):
        call = "nvmlDeviceGetApplicationsClock"
        gpu, s, clocks = self._clocks(call, handle)
        current = s.get("applications_clocks") or {"memory": clocks[0], "graphics": clocks[2]}
        if clock_type in (0, 1):
            return int(current["graphics"])
        if clock_type == 2:
            return int(current["memory"])
        raise NvmlError(INVALID_ARGUMENT, call=call)

    def nvmlDeviceGetDefaultApplicationsClock(self, handle, clock_type):
        call = "nvmlDeviceGetDefaultApplicationsClock"
        gpu, s, clocks = self._clocks(call, handle)
        if clock_type in (0, 1):
            return clocks[2]
        if clock_type == 2:
            return clocks[0]
        raise NvmlError(INVALID_ARGUMENT, call=call)

    def nvmlDeviceGetSupportedMemoryClocks(self, handle):
        gpu, s, clocks = self._clocks("nvmlDeviceGetSupportedMemoryClocks", handle)
        return [clocks[0]]

    def nvmlDeviceGetSupportedGraphicsClocks(self, handle, memoryClockMHz):
        call = "nvmlDeviceGetSupportedGraphicsClocks"
        gpu, s, clocks = self._clocks(call, handle)
        if memoryClockMHz != clocks[0]:
            raise NvmlError(INVALID_ARGUMENT, call=call)
        return self._graphics_steps(clocks)

    def nvmlDeviceSetApplicationsClocks(self, handle, maxMemClockMHz, maxGraphicsClockMHz):
        call = "nvmlDeviceSetApplicationsClocks"
        gpu, s, clocks = self._clocks(call, handle)
        if maxMemClockMHz != clocks[0] or maxGraphicsClockMHz not in self._graphics_steps(clocks):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        s["applications_clocks"] = {"memory": maxMemClockMHz, "graphics": maxGraphicsClockMHz}
        self._save()

    def nvmlDeviceResetApplicationsClocks(self, handle):
        gpu, s, clocks = self._clocks("nvmlDeviceResetApplicationsClocks", handle)
        s["applications_clocks"] = {"memory": clocks[0], "graphics": clocks[2]}
        self._save()

    # -- GPU reset (nvidia-smi -r on real hosts) --------------------------------------------------
    def reset_gpu(self, index):
        call = "reset_gpu"
        self._enter(call, index)
        if not isinstance(index, int) or index < 0 or index >= len(self.state["gpus"]):
            raise NvmlError(INVALID_ARGUMENT, call=call)
        gpu = self.state["gpus"][index]
        procs = gpu.get("processes", [])
        if procs:
            raise NvmlError(IN_USE, call=call, msg=(
                "GPU %d cannot be reset: processes are running on it (PIDs %s)"
                % (index, ", ".join(str(p["pid"]) for p in procs))), pids=[int(p["pid"]) for p in procs])
        model = self._model(gpu)
        lost = _health(gpu, "lost")
        if cat.mig_mode_persistent(model):
            gpu["mig_mode_current"] = gpu.get("mig_mode_pending", 0)
        else:
            gpu["mig_mode_current"] = 0
            gpu["mig_mode_pending"] = 0
        gpu["gpu_instances"] = []
        s = gpu.setdefault("settings", {})
        s["ecc_mode_current"] = s.get("ecc_mode_pending", s.get("ecc_mode_current", 0))
        clocks = _CLOCKS.get(model.key)
        s["applications_clocks"] = None if clocks is None else {"memory": clocks[0], "graphics": clocks[2]}
        health = gpu.setdefault("health", {})
        health.pop("ecc_volatile_uncorrected", None)
        health.pop("ecc_volatile_corrected", None)
        if lost:
            health["lost"] = False
        self.cache.clear()
        self._save()


class _Mutation(object):
    def __init__(self, backend):
        self.backend = backend
        self.lock = backend.host_lock()

    def __enter__(self):
        if self.lock.acquire():
            self.backend.locked()
        return self

    def __exit__(self, *exc):
        self.lock.release()
        return False


# NVML setters of the simulator: each runs under the host lock on freshly read state.
MUTATING_CALLS = (
    "nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement",
    "nvmlGpuInstanceDestroy", "nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceCreateComputeInstanceWithPlacement",
    "nvmlComputeInstanceDestroy", "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetPersistenceMode",
    "nvmlDeviceSetComputeMode", "nvmlDeviceSetEccMode", "nvmlDeviceSetApplicationsClocks",
    "nvmlDeviceResetApplicationsClocks", "reset_gpu",
)


def _serialized(func):
    def call(self, *args, **kwargs):
        with self._mutation():
            return func(self, *args, **kwargs)
    call.__name__ = func.__name__
    call.__doc__ = func.__doc__
    return call


for _call_name in MUTATING_CALLS:
    setattr(SimBackend, _call_name, _serialized(getattr(SimBackend, _call_name)))


def _in_instance(proc, handle):
    """Whether a simulated process runs in the MIG device that `handle` names."""
    if proc.get("gpu_instance_id") != handle.gi:
        return False
    return proc.get("compute_instance_id") in (None, handle.ci)


def valid_fault_error(name):
    """Canonical NVML error name for a fault entry, or GpuOpsError naming the valid ones."""
    code = error_code(name)
    for k, v in ERROR_CODES.items():
        if v == code:
            return k
    return name


# --------------------------------------------------------------------------------------------------
# The nvml_simulator module's logic
# --------------------------------------------------------------------------------------------------

def _summary(state):
    """What the diff and the result show of a state (no random noise such as serials)."""
    if state is None:
        return {}
    gpus = []
    for g in state["gpus"]:
        gpus.append({
            "index": g["index"], "model": g["model"], "name": g["name"], "uuid": g["uuid"],
            "pci_bus_id": g["pci_bus_id"],
            "mig_mode_current": bool(g.get("mig_mode_current")), "mig_mode_pending": bool(g.get("mig_mode_pending")),
            "gpu_instances": [
                {"id": gi["id"], "profile_id": gi["profile_id"], "start": gi["start"], "size": gi["size"],
                 "compute_instances": len(gi["compute_instances"])} for gi in g.get("gpu_instances", [])],
            "processes": [dict(p) for p in g.get("processes", [])],
            "health": dict(g.get("health") or {}),
        })
    return {
        "driver_version": state.get("driver_version"),
        "boot_id": state.get("boot_id", 1),
        "faults": [dict(f) for f in state.get("faults") or []],
        "gpus": gpus,
    }


def _layout(state):
    """[(model key, count)] runs of the GPUs in a state."""
    runs = []
    for g in state["gpus"]:
        if runs and runs[-1][0] == g["model"]:
            runs[-1][1] += 1
        else:
            runs.append([g["model"], 1])
    return [tuple(r) for r in runs]


def _wanted_layout(gpus):
    runs = []
    for entry in gpus:
        model = cat.find_model(entry.get("model"))
        count = int(entry.get("count", 1))
        if count <= 0:
            continue
        if runs and runs[-1][0] == model.key:
            runs[-1][1] += count
        else:
            runs.append([model.key, count])
    return [tuple(r) for r in runs]


def _check_index(what, value, count):
    try:
        idx = int(value)
    except (TypeError, ValueError):
        raise GpuOpsError("%s: gpu %r is not an index; valid indexes: 0-%d" % (what, value, count - 1))
    if idx < 0 or idx >= count:
        raise GpuOpsError("%s: gpu %s does not exist; valid indexes: %s"
                          % (what, value, "0-%d" % (count - 1) if count else "none (no GPUs)"))
    return idx


def _validate_faults(faults, count):
    out = []
    for f in faults:
        call = f.get("call")
        if call not in SIM_CALLS:
            raise GpuOpsError("faults: call %r is not a function the simulator implements; valid calls: %s"
                              % (call, ", ".join(SIM_CALLS)), valid_calls=list(SIM_CALLS))
        entry = {"call": call, "error": valid_fault_error(f.get("error") or "NVML_ERROR_UNKNOWN")}
        if f.get("count") is not None:
            n = int(f["count"])
            if n < 1:
                raise GpuOpsError("faults: count must be 1 or more (omit it for a permanent fault), got %s" % n)
            entry["count"] = n
        if f.get("gpu") is not None:
            entry["gpu"] = _check_index("faults", f["gpu"], count)
        out.append(entry)
    return out


def _validate_processes(state, processes):
    by_gpu = dict((g["index"], []) for g in state["gpus"])
    pids = set()
    for p in processes:
        idx = _check_index("processes", p.get("gpu"), len(state["gpus"]))
        gpu = state["gpus"][idx]
        try:
            pid = int(p.get("pid"))
        except (TypeError, ValueError):
            raise GpuOpsError("processes: pid %r is not a number" % (p.get("pid"),))
        if pid <= 0:
            raise GpuOpsError("processes: pid must be positive, got %s" % pid)
        gi_id = p.get("gpu_instance_id")
        ci_id = p.get("compute_instance_id")
        entry = {"pid": pid, "name": p.get("name") or "python"}
        existing = [gi["id"] for gi in gpu["gpu_instances"]]
        if gi_id is not None:
            gi_id = int(gi_id)
            if gi_id not in existing:
                raise GpuOpsError("processes: GPU %d has no GPU instance %s; existing GPU instance ids: %s"
                                  % (idx, gi_id, ", ".join(str(i) for i in existing) or "none"),
                                  valid_gpu_instance_ids=existing)
            entry["gpu_instance_id"] = gi_id
            if ci_id is not None:
                cis = [ci["id"] for gi in gpu["gpu_instances"] if gi["id"] == gi_id for ci in gi["compute_instances"]]
                if int(ci_id) not in cis:
                    raise GpuOpsError("processes: GPU %d instance %d has no compute instance %s; existing: %s"
                                      % (idx, gi_id, ci_id, ", ".join(str(c) for c in cis) or "none"))
                entry["compute_instance_id"] = int(ci_id)
        elif gpu.get("mig_mode_current") and existing:
            raise GpuOpsError("processes: GPU %d is in MIG mode; a process runs in a GPU instance: give "
                              "gpu_instance_id (existing: %s)" % (idx, ", ".join(str(i) for i in existing)),
                              valid_gpu_instance_ids=existing)
        if p.get("used_memory_mib") is not None:
            entry["used_memory_mib"] = int(p["used_memory_mib"])
        if (idx, pid) in pids:
            raise GpuOpsError("processes: pid %d is listed twice on GPU %d" % (pid, idx))
        pids.add((idx, pid))
        by_gpu[idx].append(entry)
    return by_gpu


def _validate_health(health, count):
    out = {}
    for h in health:
        idx = _check_index("health", h.get("gpu"), count)
        entry = out.setdefault(idx, {})
        for k, v in h.items():
            if k == "gpu" or v is None:
                continue
            if k not in HEALTH_DEFAULTS:
                raise GpuOpsError("health: unknown key %r; valid keys: gpu, %s" % (k, ", ".join(sorted(HEALTH_DEFAULTS))),
                                  valid_keys=sorted(HEALTH_DEFAULTS))
            default = HEALTH_DEFAULTS[k]
            try:
                if isinstance(default, bool):
                    v = _boolean(v)
                elif isinstance(default, int):
                    v = int(v)
                else:
                    v = float(v)
            except (TypeError, ValueError):
                raise GpuOpsError("health: %s must be a %s, got %r" % (k, type(default).__name__, v))
            entry[k] = v
    return out


def _boolean(v):
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(v)


def configure(params, check_mode=False):
    """Create, change, reboot or remove a simulated host (the nvml_simulator module).

    Everything is validated before the state file is written. Returns the module result.
    """
    path = params["path"]
    with HostLock(lock_path(path), what="gpuops.k8s.nvml_simulator"):
        return _configure(path, params, check_mode)


def _configure(path, params, check_mode):
    exists = os.path.exists(path)
    try:
        before = load_state(path) if exists else None
    except GpuOpsError:
        # an unreadable file can still be recreated or removed
        if not (params.get("reset") or params.get("state") == "absent"):
            raise
        before = None
    result = {"changed": False, "path": path}
    if params.get("state", "present") == "absent":
        result["changed"] = exists
        if exists and not check_mode:
            os.unlink(path)
        result["diff"] = {"before": _summary(before), "after": {}}
        return result

    gpus = params.get("gpus")
    if gpus is not None:
        wanted = _wanted_layout(gpus)  # validates models
    created = False
    if before is None or params.get("reset"):
        if gpus is None:
            raise GpuOpsError("gpus is required to create the simulated host %s (list of {model, count}; models: %s)"
                              % (path, ", ".join(cat.model_keys())), valid_models=cat.model_keys())
        state = new_state(gpus, params.get("driver_version"), params.get("seed"))
        created = True
    else:
        state = json.loads(json.dumps(before))
        if gpus is not None and wanted != _layout(state):
            raise GpuOpsError(
                "the simulated host %s has GPUs %s, not %s; set reset: true to recreate it (this drops its MIG "
                "layout, processes and faults)" % (path, ", ".join("%dx %s" % (n, m) for m, n in _layout(state)),
                                                   ", ".join("%dx %s" % (n, m) for m, n in wanted)),
                current_gpus=[{"model": m, "count": n} for m, n in _layout(state)])
        if params.get("driver_version"):
            state["driver_version"] = params["driver_version"]
            state.pop("cuda_driver_version", None)

    count = len(state["gpus"])
    if params.get("reboot") and not created:
        reboot_state(state)
    if params.get("processes") is not None:
        by_gpu = _validate_processes(state, params["processes"])
        for g in state["gpus"]:
            g["processes"] = by_gpu[g["index"]]
    if params.get("faults") is not None:
        state["faults"] = _validate_faults(params["faults"], count)
    if params.get("health") is not None:
        for idx, values in _validate_health(params["health"], count).items():
            health = state["gpus"][idx].setdefault("health", {})
            for k, v in values.items():
                if v == HEALTH_DEFAULTS[k]:
                    health.pop(k, None)
                else:
                    health[k] = v
    if params.get("cuda_driver_version"):
        state["cuda_driver_version"] = int(params["cuda_driver_version"])

    changed = created or before is None or state != before
    result["changed"] = changed
    result["created"] = created
    result["rebooted"] = bool(params.get("reboot") and not created)
    if changed and not check_mode:
        save_state(path, state)
    summary = _summary(state)
    result["diff"] = {"before": _summary(before), "after": summary}
    result["simulator"] = summary
    return result
