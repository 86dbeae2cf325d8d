# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVML simulator, the state file: its shape, creation, loading (validated), atomic saving, reboot.

The simulator is pynvml's function names over this JSON state file, enforcing real MIG rules: the
read path in ``sim.reader`` (+ ``sim.mig_reader``), the mutations in ``sim.writer``, the
nvml_simulator module's logic in ``sim.configure``. The catalog (``catalog.gpus``) is the single source of models and MIG profiles. The state file is
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
  change; ``nvml.backend.host_lock`` holds it across a whole plan-and-apply.
* Seeded random faults: ``random_faults: {rate, seed, calls, error}`` fails each mutating call (or
  each of ``calls``) with probability ``rate``, reproducibly (draw ``n`` of seed ``s`` is
  ``Random("s:n")``); ``draws`` and ``injected`` count in the state. ``mix: [{error, weight,
  after_change}]`` draws which error (by weight, ``Random("s:n:kind")``); ``after_change`` makes the change
  and then fails the call. ``injected_by_error`` and ``injected_after_change`` count them.
* Injected faults: ``{"call": <function name>, "error": <NVML error name>, "count": N, "gpu": i}``
  make that call fail N times (always without count; on every GPU without gpu); with ``"after_change":
  true`` a mutating call makes its change first and then fails (the driver did it, the answer was an error).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import uuid as uuidlib
from typing import Any, Dict, List, Mapping, NoReturn, Optional, TYPE_CHECKING

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

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

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self):
        return "Obj(%s)" % ", ".join("%s=%r" % kv for kv in sorted(self.__dict__.items()))

    def __eq__(self, other):
        return isinstance(other, Obj) and self.__dict__ == other.__dict__

    def __ne__(self, other):
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    if TYPE_CHECKING:  # the fields are set per call, as pynvml's structs have them
        def __getattr__(self, name: str) -> Any:
            ...


class DeviceHandle(object):
    __slots__ = ("gpu", "gi", "ci")

    def __init__(self, gpu: int, gi: Optional[int] = None, ci: Optional[int] = None) -> None:
        self.gpu = gpu
        self.gi = gi
        self.ci = ci

    @property
    def is_mig(self) -> bool:
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

    def __init__(self, gpu: int, gi: int) -> None:
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

    def __init__(self, gpu: int, gi: int, ci: int) -> None:
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

def cuda_for_driver(driver_version: str) -> int:
    major = gpu_catalog.version_tuple(driver_version)[0] if driver_version else 0
    for branch, cuda in _CUDA_BY_BRANCH:
        if major >= branch:
            return cuda
    return 10020


def new_gpu(index: int, model: Any, nvml_name: Optional[str] = None, rng: Any = None) -> Dict[str, Any]:
    """State of one freshly installed GPU of ``model`` (GpuModel) at ``index``."""
    rng = rng or random
    variant = gpu_catalog.variant_for(model, nvml_name)
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


def new_state(gpus: List[Dict[str, Any]], driver_version: Optional[str] = None,
              seed: Optional[int] = None) -> Dict[str, Any]:
    """A simulated host: ``gpus`` is a list of ``{model, count}`` (model: catalog key or NVML name)."""
    rng = random.Random(seed)
    state: Dict[str, Any] = {
        "version": STATE_VERSION,
        "driver_version": driver_version or DEFAULT_DRIVER,
        "gpus": [],
        "faults": [],
        "boot_id": 1,
    }
    for entry in gpus:
        ref: Any = entry.get("model")
        model = gpu_catalog.find_model(ref)
        name = ref if isinstance(ref, str) and ref.lower() != model.key else None
        count = int(entry.get("count", 1))
        if count < 0:
            raise GpuOpsError("gpus: count must be 0 or more, got %s for model %s" % (count, ref))
        for dummy in range(count):
            state["gpus"].append(new_gpu(len(state["gpus"]), model, name, rng))
    return state


def load_state(path: str) -> Dict[str, Any]:
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


def _field(where, key):
    return "%s.%s" % (where, key) if where else key


class _Shape(object):
    """Checks one state file's shape; every error names the file, the path and the field."""

    def __init__(self, path):
        self.path = path

    def fail(self, field: str, what: str) -> NoReturn:
        raise GpuOpsError("NVML simulator state file %s: %s %s; fix the file or recreate it with "
                          "gpuops.k8s.nvml_simulator (reset: true)" % (self.path, field, what),
                          path=self.path, field=field)

    def get(self, obj: Mapping[str, Any], key: str, where: str, kind: str, required: bool = True,
            nullable: bool = False) -> Any:
        if key not in obj:
            if required:
                self.fail(_field(where, key), "is missing (%s)" % _KINDS[kind])
            return None
        value = obj[key]
        if value is None and nullable:
            return None
        if not _CHECKS[kind](value):
            self.check(value, _field(where, key), kind)
        return value

    def check(self, value: Any, field: str, kind: str) -> None:
        if not _CHECKS[kind](value):
            self.fail(field, "must be %s, got %s" % (_KINDS[kind], json.dumps(value)[:60]))


_KINDS = {"int": "an integer", "mode": "0 or 1", "str": "a string", "list": "a list", "dict": "a mapping",
          "number": "a number", "code": "an NVML error name or code", "bool": "true or false"}
# one test per kind (every gpu_info reads and checks the whole file: only the asked test runs)
_CHECKS = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "mode": lambda v: isinstance(v, int) and v in (0, 1),
    "str": lambda v: isinstance(v, str),
    "list": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, dict),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "code": lambda v: isinstance(v, (str, int)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
}


def validate_state(state: Dict[str, Any], path: str) -> None:
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
        if gpu_catalog.lookup_model(model) is None:
            sh.fail(where + ".model", "is %r, not a catalog model; valid models: %s" % (model, ", ".join(gpu_catalog.model_keys())))
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
        for key in ("draws", "injected", "injected_after_change"):
            sh.get(spec, key, "random_faults", "int", required=False)
        for i, kind in enumerate(sh.get(spec, "mix", "random_faults", "list", required=False, nullable=True) or []):
            where = "random_faults.mix[%d]" % i
            sh.check(kind, where, "dict")
            sh.get(kind, "error", where, "code")
            weight = sh.get(kind, "weight", where, "number", required=False)
            if weight is not None and weight <= 0:
                sh.fail(where + ".weight", "must be more than 0, got %s" % weight)
            sh.get(kind, "after_change", where, "bool", required=False)
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
        sh.get(fault, "after_change", where, "bool", required=False)
        gpu = sh.get(fault, "gpu", where, "int", required=False, nullable=True)
        if gpu is not None and not 0 <= gpu < len(gpus):
            sh.fail(where + ".gpu", "is %d; the host has GPUs 0-%d" % (gpu, len(gpus) - 1))


def lock_path(path: str) -> str:
    """The host lock of a simulated host: a file beside its state file."""
    return path + ".lock"


def save_state(path: str, state: Dict[str, Any]) -> None:
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


def gi_swizzle_id(memory_slices: int, start: int, size: int) -> int:
    """GPU instance id as the driver assigns it: a binary tree over the memory slices.

    With 8 memory slices: the whole GPU is 0, halves 1-2, quarters 3-6, eighths 7-14 (A100/H100 show
    GI ids 7-13 for 1g instances, 1-2 for 3g, 0 for 7g).
    """
    return memory_slices // size - 1 + start // size


def _health(gpu, key):
    h = gpu.get("health") or {}
    return h.get(key, HEALTH_DEFAULTS[key])


def reset_gpu_state(gpu: Dict[str, Any], model: Any) -> Dict[str, Any]:
    """What a GPU reset does to one GPU (a host reboot does it too): the pending MIG mode applies (Ampere) or MIG
    mode is lost (Hopper and newer), no instances, the pending ECC mode applies, default application clocks,
    volatile ECC counters cleared. Returns the GPU's settings."""
    if gpu_catalog.mig_mode_persistent(model):
        gpu["mig_mode_current"] = gpu.get("mig_mode_pending", 0)
    else:
        gpu["mig_mode_current"] = 0
        gpu["mig_mode_pending"] = 0
    gpu["gpu_instances"] = []
    settings = gpu.setdefault("settings", {})
    settings["ecc_mode_current"] = settings.get("ecc_mode_pending", settings.get("ecc_mode_current", 0))
    clocks = _CLOCKS.get(model.key)
    settings["applications_clocks"] = None if clocks is None else {"memory": clocks[0], "graphics": clocks[2]}
    health = gpu.setdefault("health", {})
    health.pop("ecc_volatile_uncorrected", None)
    health.pop("ecc_volatile_corrected", None)
    return settings


def reboot_gpu_state(gpu: Dict[str, Any], model: Any) -> None:
    """What a host reboot does to one GPU: a reset (``reset_gpu_state``), no processes, default persistence and
    compute mode and power limit."""
    settings = reset_gpu_state(gpu, model)
    gpu["processes"] = []
    settings["persistence_mode"] = 0
    settings["compute_mode"] = 0
    settings["power_limit_mw"] = _POWER.get(model.key, (300, 100))[0] * 1000


def reboot_state(state: Dict[str, Any]) -> Dict[str, Any]:
    """A simulated host reboot: pending modes applied on Ampere, MIG mode lost on Hopper+, no instances."""
    for gpu in state["gpus"]:
        reboot_gpu_state(gpu, gpu_catalog.find_model(gpu["model"]))
    state["boot_id"] = int(state.get("boot_id", 1)) + 1
    return state


# --------------------------------------------------------------------------------------------------
# The backend
# --------------------------------------------------------------------------------------------------
