# -*- coding: utf-8 -*-
"""The NVML access layer: error codes, translation of pynvml errors, real-backend failures.

The last tests run the real pynvml in subprocesses. Which ones apply depends on the machine:

- no libnvidia-ml.so.1 on the machine: the real pynvml finds no library (one clear message);
- no NVIDIA kernel driver (no /proc/driver/nvidia): Debian's real libnvidia-ml1 (535) reports the
  driver not loaded (one clear message);
- a loaded driver and its libnvidia-ml (a GPU runner): gpu_info reads the real GPUs, read-only, and
  its facts are compared with what pynvml reports directly.

Each group is skipped with its reason where the machine cannot produce its case (pytest reports
skips as skipped, never as passed; ``make units`` prints the reasons).
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))))
COLLECTIONS = os.path.join(TOP, ".build", "collections")
DEB_CACHE = os.path.join(TOP, ".cache", "libnvidia-ml1")
DEBIAN_SOURCE = "deb http://deb.debian.org/debian bookworm main contrib non-free non-free-firmware"


def test_error_codes_match_pynvml():
    pynvml = pytest.importorskip("pynvml")
    for name, value in nvml.ERROR_CODES.items():
        if hasattr(pynvml, name):
            assert getattr(pynvml, name) == value, name
    assert (nvml.IN_USE, nvml.INSUFFICIENT_RESOURCES, nvml.RESET_REQUIRED) == (19, 23, 16)


@pytest.mark.parametrize("ref,value", [("NVML_ERROR_IN_USE", 19), ("in_use", 19), (23, 23), ("16", 16)])
def test_error_code_lookup(ref, value):
    assert nvml.error_code(ref) == value


def test_unknown_error_name_lists_valid_names():
    with pytest.raises(GpuOpsError) as e:
        nvml.error_code("NVML_ERROR_COFFEE")
    assert "NVML_ERROR_IN_USE" in e.value.msg


def test_nvml_error_is_a_gpuops_error_with_details():
    e = nvml.NvmlError(19, call="nvmlGpuInstanceDestroy")
    assert isinstance(e, GpuOpsError)
    assert e.value == 19 and e.name == "NVML_ERROR_IN_USE"
    assert e.msg.startswith("nvmlGpuInstanceDestroy failed: NVML_ERROR_IN_USE")
    assert e.details == {"nvml_error": "NVML_ERROR_IN_USE", "nvml_error_code": 19, "nvml_call": "nvmlGpuInstanceDestroy"}


class FakeNVMLError(Exception):
    def __init__(self, value):
        super(FakeNVMLError, self).__init__(value)
        self.value = value


def fake_pynvml(init_error=None, procs=()):
    """A stand-in for the pynvml module (same function names and error class)."""
    mod = types.ModuleType("pynvml")
    mod.NVMLError = FakeNVMLError
    calls = []

    def nvmlInit():
        calls.append("nvmlInit")
        if init_error is not None:
            raise FakeNVMLError(init_error)

    def nvmlShutdown():
        calls.append("nvmlShutdown")

    def nvmlDeviceGetHandleByIndex(i):
        if i > 0:
            raise FakeNVMLError(2)
        return "h0"

    mod.nvmlInit = nvmlInit
    mod.nvmlShutdown = nvmlShutdown
    mod.nvmlDeviceGetHandleByIndex = nvmlDeviceGetHandleByIndex
    mod.nvmlDeviceGetComputeRunningProcesses = lambda h: [types.SimpleNamespace(pid=p) for p in procs]
    mod.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:17:00.0")
    mod.calls = calls
    return mod


@pytest.mark.parametrize("code,words", [
    (12, ["libnvidia-ml.so.1 not found", "NVML_ERROR_LIBRARY_NOT_FOUND", "install the driver"]),
    (9, ["driver not loaded", "NVML_ERROR_DRIVER_NOT_LOADED", "modprobe nvidia"]),
    (4, ["no permission", "become: true"]),
    (18, ["reboot"]),
    (999, ["NVML initialization failed", "NVML_ERROR_UNKNOWN"]),
])
def test_real_backend_init_failures_give_one_clear_message(monkeypatch, code, words):
    monkeypatch.delenv("GPUOPS_NVML_SIMULATOR", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=code))
    with pytest.raises(GpuOpsError) as e:
        with nvml.open_nvml():
            pass
    assert not isinstance(e.value, nvml.NvmlError)
    for w in words:
        assert w.lower() in e.value.msg.lower()
    assert e.value.details["nvml_error_code"] == code


def test_missing_nvidia_ml_py_names_the_package(monkeypatch):
    monkeypatch.delenv("GPUOPS_NVML_SIMULATOR", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(GpuOpsError) as e:
        with nvml.open_nvml():
            pass
    assert "nvidia-ml-py" in e.value.msg and "pip install nvidia-ml-py" in e.value.msg


def test_real_backend_translates_errors_and_shuts_down(monkeypatch):
    monkeypatch.delenv("GPUOPS_NVML_SIMULATOR", raising=False)
    fake = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with pytest.raises(nvml.NvmlError) as e:
        with nvml.open_nvml() as nv:
            assert nv.kind == "nvml"
            assert nv.nvmlDeviceGetHandleByIndex(0) == "h0"
            nv.nvmlDeviceGetHandleByIndex(5)
    assert e.value.value == 2 and e.value.call == "nvmlDeviceGetHandleByIndex"
    assert fake.calls == ["nvmlInit", "nvmlShutdown"]


def test_real_backend_missing_function_is_clear(monkeypatch):
    nv = nvml.RealBackend(fake_pynvml())
    with pytest.raises(nvml.NvmlError) as e:
        nv.nvmlDeviceGetSomethingNew(1)
    assert e.value.value == nvml.FUNCTION_NOT_FOUND


def test_real_reset_runs_nvidia_smi_with_the_bus_id():
    ran = []

    def run_command(args):
        ran.append(args)
        return 0, "GPU 00000000:17:00.0 was successfully reset.", ""

    nv = nvml.RealBackend(fake_pynvml(), run_command=run_command)
    nv.reset_gpu(0)
    assert ran == [["nvidia-smi", "-r", "-i", "00000000:17:00.0"]]


def test_real_reset_refused_while_processes_run():
    ran = []
    nv = nvml.RealBackend(fake_pynvml(procs=[11, 12]), run_command=lambda a: ran.append(a) or (0, "", ""))
    with pytest.raises(nvml.NvmlError) as e:
        nv.reset_gpu(0)
    assert e.value.value == nvml.IN_USE and "11, 12" in e.value.msg
    assert ran == []


def test_real_reset_failure_reports_nvidia_smi_output():
    nv = nvml.RealBackend(fake_pynvml(), run_command=lambda a: (3, "", "Unable to reset GPU: in use by another client"))
    with pytest.raises(GpuOpsError) as e:
        nv.reset_gpu(0)
    assert "in use by another client" in e.value.msg and e.value.details["rc"] == 3


def test_real_backend_array_calls_use_pynvml_structs():
    """The Python signatures of the C-array calls fill pynvml's ctypes arrays."""
    pynvml = pytest.importorskip("pynvml")
    mod = types.ModuleType("pynvml")
    mod.NVMLError = pynvml.NVMLError
    mod.c_nvmlGpuInstancePlacement_t = pynvml.c_nvmlGpuInstancePlacement_t
    mod.c_nvmlGpuInstance_t = pynvml.c_nvmlGpuInstance_t
    mod.c_nvmlComputeInstancePlacement_t = pynvml.c_nvmlComputeInstancePlacement_t
    mod.c_nvmlComputeInstance_t = pynvml.c_nvmlComputeInstance_t
    created = []

    def placements(device, profile_id, arr, count):
        for i, start in enumerate((0, 4)):
            arr[i].start, arr[i].size = start, 4
        count._obj.value = 2

    def create(device, profile_id, placement_ref, *rest):
        created.append((placement_ref._obj.start, placement_ref._obj.size))
        return "gi"

    mod.nvmlDeviceGetGpuInstancePossiblePlacements = placements
    mod.nvmlDeviceCreateGpuInstanceWithPlacement = create
    nv = nvml.RealBackend(mod)
    assert [(p.start, p.size) for p in nv.nvmlDeviceGetGpuInstancePossiblePlacements("h", 9)] == [(0, 4), (4, 4)]
    assert nv.nvmlDeviceCreateGpuInstanceWithPlacement("h", 9, {"start": 4, "size": 4}) == "gi"
    assert created == [(4, 4)]


# ------------------------------------------------------------------------------------------------
# The real pynvml in a subprocess: no library, and Debian's libnvidia-ml1 without a kernel driver
# ------------------------------------------------------------------------------------------------

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
try:
    with nvml.open_nvml() as nv:
        out = {"opened": True}
except GpuOpsError as e:
    out = {"msg": e.msg, "details": e.details}
print(json.dumps(out))
"""


def _probe(ld_library_path):
    pytest.importorskip("pynvml")
    env = dict(os.environ)
    env.pop("GPUOPS_NVML_SIMULATOR", None)
    env["LD_LIBRARY_PATH"] = ld_library_path
    proc = subprocess.run([sys.executable, "-c", PROBE, COLLECTIONS], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def _run_module(module, args, ld_library_path):
    """Run a module file the way Ansible does (args JSON on argv) and return its JSON result."""
    env = dict(os.environ)
    env.pop("GPUOPS_NVML_SIMULATOR", None)
    env["LD_LIBRARY_PATH"] = ld_library_path
    env["PYTHONPATH"] = COLLECTIONS
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"ANSIBLE_MODULE_ARGS": args}, f)
    try:
        proc = subprocess.run([sys.executable, os.path.join(TOP, "plugins", "modules", module + ".py"), f.name],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=120, check=False)
    finally:
        os.unlink(f.name)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def _system_has_libnvidia_ml():
    """libnvidia-ml.so.1 installed where the dynamic loader finds it without LD_LIBRARY_PATH."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu",
              "/usr/lib/aarch64-linux-gnu", "/lib64"):
        if os.path.exists(os.path.join(d, "libnvidia-ml.so.1")):
            return True
    try:
        ctypes.CDLL("libnvidia-ml.so.1")  # ld.so.cache, container-toolkit injected libraries, ...
    except OSError:
        return False
    return True


def _nvidia_driver_loaded():
    return os.path.exists("/proc/driver/nvidia")


HAS_LIBNVIDIA_ML = _system_has_libnvidia_ml()
HAS_DRIVER = _nvidia_driver_loaded()
no_library_only = pytest.mark.skipif(
    HAS_LIBNVIDIA_ML, reason="libnvidia-ml.so.1 is installed on this machine: the no-library case cannot be produced")
no_driver_only = pytest.mark.skipif(
    HAS_DRIVER, reason="the NVIDIA kernel driver is loaded (/proc/driver/nvidia): the driver-not-loaded case cannot be produced")
real_gpu_only = pytest.mark.skipif(
    not (HAS_DRIVER and HAS_LIBNVIDIA_ML),
    reason="no NVIDIA driver and libnvidia-ml.so.1 on this machine: the real-GPU read-only tests need a GPU host")


@no_library_only
def test_real_pynvml_without_any_nvidia_library():
    empty = tempfile.mkdtemp()
    try:
        out = _probe(empty)
        assert out["details"]["nvml_error"] == "NVML_ERROR_LIBRARY_NOT_FOUND"
        assert "libnvidia-ml.so.1 not found" in out["msg"]
        result = _run_module("gpu_info", {}, empty)
        assert result["failed"] and "libnvidia-ml.so.1 not found" in result["msg"]
        assert "exception" not in result
    finally:
        shutil.rmtree(empty)


def _apt(args, conf_dir):
    base = ["apt-get", "-q", "-o", "Dir::Etc::SourceList=%s" % os.path.join(conf_dir, "sources.list"),
            "-o", "Dir::Etc::SourceParts=%s" % os.path.join(conf_dir, "sources.list.d"),
            "-o", "Dir::State::Lists=%s" % os.path.join(conf_dir, "lists"),
            "-o", "Dir::Cache=%s" % os.path.join(conf_dir, "cache"),
            "-o", "APT::Sandbox::User=root"]
    proc = subprocess.run(base + args, cwd=conf_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    if proc.returncode != 0:
        pytest.fail("fetching Debian's libnvidia-ml1 failed: apt-get %s exited %s:\n%s"
                    % (" ".join(args), proc.returncode, proc.stdout[-3000:]))
    return proc.stdout


@pytest.fixture(scope="module")
def debian_libnvidia_ml():
    """Directory holding Debian bookworm's libnvidia-ml.so.1 (fetched once, cached under .cache/)."""
    lib_dir = os.path.join(DEB_CACHE, "root", "usr", "lib", "x86_64-linux-gnu", "nvidia", "current")
    if os.path.exists(os.path.join(lib_dir, "libnvidia-ml.so.1")):
        return lib_dir
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        pytest.fail("apt-get and dpkg are needed to fetch Debian's libnvidia-ml1 for the driver-not-loaded test")
    os.makedirs(DEB_CACHE, exist_ok=True)
    debs = [f for f in os.listdir(DEB_CACHE) if f.startswith("libnvidia-ml1_") and f.endswith(".deb")]
    if not debs:
        conf = tempfile.mkdtemp(prefix="apt-", dir=DEB_CACHE)
        try:
            for d in ("sources.list.d", "lists/partial", "cache/archives/partial"):
                os.makedirs(os.path.join(conf, d))
            with open(os.path.join(conf, "sources.list"), "w") as f:
                f.write(DEBIAN_SOURCE + "\n")
            _apt(["update"], conf)
            _apt(["download", "libnvidia-ml1"], conf)
            debs = [f for f in os.listdir(conf) if f.startswith("libnvidia-ml1_") and f.endswith(".deb")]
            if not debs:
                pytest.fail("apt-get download libnvidia-ml1 produced no .deb in %s" % conf)
            shutil.move(os.path.join(conf, debs[0]), os.path.join(DEB_CACHE, debs[0]))
        finally:
            shutil.rmtree(conf, ignore_errors=True)
    root = os.path.join(DEB_CACHE, "root")
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run(["dpkg", "-x", os.path.join(DEB_CACHE, sorted(debs)[-1]), root], check=True)
    if not os.path.exists(os.path.join(lib_dir, "libnvidia-ml.so.1")):
        pytest.fail("the libnvidia-ml1 package no longer ships %s/libnvidia-ml.so.1" % lib_dir)
    return lib_dir


@pytest.fixture
def keep_dev_clean():
    """libnvidia-ml, run as root, creates /dev/nvidiactl; remove it again when it was not there."""
    nodes = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"]
    before = set(n for n in nodes if os.path.exists(n))
    yield
    for n in nodes:
        if n not in before and os.path.exists(n):
            try:
                os.unlink(n)
            except OSError:
                pass


@no_driver_only
def test_real_pynvml_with_debian_libnvidia_ml_and_no_driver(debian_libnvidia_ml, keep_dev_clean):
    out = _probe(debian_libnvidia_ml)
    assert out["details"]["nvml_error"] == "NVML_ERROR_DRIVER_NOT_LOADED", out
    assert out["msg"].startswith("NVIDIA driver not loaded")
    result = _run_module("mig_mode", {"state": "enabled"}, debian_libnvidia_ml)
    assert result["failed"] and result["msg"].startswith("NVIDIA driver not loaded")
    assert result["nvml_error_code"] == 9


# ------------------------------------------------------------------------------------------------
# A GPU host: gpu_info against the real driver, read-only, checked against pynvml itself
# ------------------------------------------------------------------------------------------------

# What pynvml reports directly, without the collection: the reference for gpu_info's facts.
REFERENCE = r"""
import json
import pynvml

def text(v):
    return v.decode() if isinstance(v, bytes) else v

pynvml.nvmlInit()
try:
    gpus = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        try:
            current, pending = pynvml.nvmlDeviceGetMigMode(h)
            mig = {"capable": True, "current": bool(current), "pending": bool(pending)}
        except pynvml.NVMLError_NotSupported:
            mig = {"capable": False, "current": False, "pending": False}
        gpus.append({"name": text(pynvml.nvmlDeviceGetName(h)), "uuid": text(pynvml.nvmlDeviceGetUUID(h)),
                     "memory_total_mib": int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // (1024 * 1024),
                     "mig": mig})
    out = {"driver_version": text(pynvml.nvmlSystemGetDriverVersion()), "gpus": gpus}
finally:
    pynvml.nvmlShutdown()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def real_gpus():
    """(gpu_info's result, pynvml's own view) on this GPU host; both read-only."""
    pytest.importorskip("pynvml")
    env = dict(os.environ)
    env.pop("GPUOPS_NVML_SIMULATOR", None)
    proc = subprocess.run([sys.executable, "-c", REFERENCE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    reference = json.loads(proc.stdout)
    result = _run_module("gpu_info", {}, os.environ.get("LD_LIBRARY_PATH", ""))
    assert not result.get("failed"), result.get("msg")
    return result, reference


@real_gpu_only
def test_real_gpu_info_reads_every_gpu(real_gpus):
    result, reference = real_gpus
    assert result["backend"] == "nvml"
    assert result["changed"] is False
    assert len(reference["gpus"]) >= 1, "the driver is loaded but NVML sees no GPU"
    assert len(result["gpus"]) == len(reference["gpus"])
    assert result["driver_version"] == reference["driver_version"]
    assert [g["index"] for g in result["gpus"]] == list(range(len(reference["gpus"])))
    assert [g["uuid"] for g in result["gpus"]] == [g["uuid"] for g in reference["gpus"]]
    assert all(g["lost"] is False for g in result["gpus"])


@real_gpu_only
def test_real_gpu_names_are_in_the_catalog(real_gpus):
    from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
    result, reference = real_gpus
    for got, ref in zip(result["gpus"], reference["gpus"]):
        assert got["name"] == ref["name"]
        model = gpu_catalog.lookup_model(ref["name"])
        assert model is not None, "%s is not in the GPU catalog (keys: %s)" % (ref["name"], ", ".join(gpu_catalog.model_keys()))
        assert got["model"] == model.key


@real_gpu_only
def test_real_gpu_memory_matches_nvml(real_gpus):
    from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
    result, reference = real_gpus
    for got, ref in zip(result["gpus"], reference["gpus"]):
        assert got["memory_total_mib"] == ref["memory_total_mib"]
        model = gpu_catalog.find_model(got["model"])
        # the catalog holds the total NVML reports for the model; drivers differ by a few MiB
        assert abs(got["memory_total_mib"] - model.total_memory_mib) <= 0.02 * model.total_memory_mib, \
            (got["name"], got["memory_total_mib"], model.total_memory_mib)


@real_gpu_only
def test_real_gpu_mig_mode_matches_nvml(real_gpus):
    from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
    result, reference = real_gpus
    for got, ref in zip(result["gpus"], reference["gpus"]):
        assert got["mig_capable"] == ref["mig"]["capable"]
        assert got["mig_mode_current"] == ref["mig"]["current"]
        assert got["mig_mode_pending"] == ref["mig"]["pending"]
        assert got["mig_capable"] == gpu_catalog.mig_capable(gpu_catalog.find_model(got["model"]))
        if not got["mig_mode_current"]:
            assert got["instances"] == []
