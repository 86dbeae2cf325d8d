# -*- coding: utf-8 -*-
"""Issue 16 items 3, 5, 6: unknown GPU indexes, binary config files, duplicate keys."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import api as nvml
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def _host(tmp_path, count=2):
    path = str(tmp_path / "host.json")
    state = nvml_sim.new_state([{"model": "h100_80gb", "count": count}], seed=1)
    for gpu in state["gpus"]:
        gpu["mig_mode_current"] = gpu["mig_mode_pending"] = 1
    nvml_sim.save_state(path, state)
    return path


def _run(path, params, check_mode=False):
    with nvml.open_nvml(path) as backend:
        return mig_engine.run_mig_partition(backend, params, check_mode=check_mode)


# ---------------------------------------------------------------- item 3: unknown GPU index


@pytest.mark.parametrize("check_mode", [True, False])
def test_inline_layout_naming_an_absent_gpu_is_refused(tmp_path, check_mode):
    path = _host(tmp_path)
    layout = [{"devices": [0, 9], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"layout": layout}, check_mode=check_mode)
    msg = e.value.msg
    assert "9" in msg and "GPUs present: 0 (h100_80gb), 1 (h100_80gb)" in msg and "nothing was changed" in msg
    assert e.value.details["gpus_present"] == [0, 1] and e.value.details["changed"] is False
    with nvml.open_nvml(path) as backend:  # GPU 0 untouched too
        assert backend.nvmlDeviceGetGpuInstances(backend.nvmlDeviceGetHandleByIndex(0), 0) == []
        assert not any(backend.nvmlDeviceGetGpuInstances(backend.nvmlDeviceGetHandleByIndex(0), p) for p in range(20)
                       if p != 0 and _valid_profile(backend, p))


def _valid_profile(backend, profile_id):
    try:
        backend.nvmlDeviceGetGpuInstanceProfileInfoById(backend.nvmlDeviceGetHandleByIndex(0), profile_id)
        return True
    except nvml.NvmlError:
        return False


def test_config_file_naming_absent_gpus_skips_them_with_a_warning(tmp_path):
    path = _host(tmp_path)
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: v1\nmig-configs:\n  fleet:\n    - devices: [0, 1, 2, 3, 4, 5, 6, 7]\n"
                   "      mig-enabled: true\n      mig-devices: {\"3g.40gb\": 2}\n")
    r = _run(path, {"config_file": str(cfg), "config": "fleet"})
    assert r["changed"] and r["resources"] == {"nvidia.com/mig-3g.40gb": 4}
    assert r["absent_gpus"] == [2, 3, 4, 5, 6, 7]
    assert len(r["warnings"]) == 1
    w = r["warnings"][0]
    assert "2, 3, 4, 5, 6, 7" in w and "GPUs present: 0 (h100_80gb), 1 (h100_80gb)" in w and "skipped" in w


def test_config_file_with_devices_all_gives_no_warning(tmp_path):
    path = _host(tmp_path)
    r = _run(path, {"layout": [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]})
    assert r["changed"] and r["warnings"] == [] and r["absent_gpus"] == []


# ---------------------------------------------------------------- item 5: binary config file


def test_binary_config_file_names_the_file(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(b"version: v1\nmig-configs:\n  \xff\xfe\x00bad: []\n")
    with pytest.raises(GpuOpsError) as e:
        mig_config.load_config_file(str(cfg))
    assert str(cfg) in e.value.msg and "UTF-8" in e.value.msg and "byte 0xff at offset 27" in e.value.msg


def test_latin1_config_file_names_the_file(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_bytes(u"# caf\u00e9\nversion: v1\n".encode("latin-1"))
    with pytest.raises(GpuOpsError) as e:
        mig_config.load_config_file(str(cfg))
    assert str(cfg) in e.value.msg and "UTF-8" in e.value.msg


# ---------------------------------------------------------------- item 6: duplicate keys


@pytest.mark.parametrize("text, key, line, first", [
    ("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: false\n  a:\n"
     "    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n", "a", 6, 3),
    ("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n"
     "      mig-devices:\n        1g.10gb: 7\n        1g.10gb: 3\n", "1g.10gb", 8, 7),
    ("version: v1\nversion: v1\nmig-configs: {}\n", "version", 2, 1),
    ("version: v1\nmig-configs:\n  a:\n    - devices: all\n      mig-enabled: true\n      mig-enabled: false\n",
     "mig-enabled", 6, 5),
])
def test_duplicate_keys_are_refused_with_the_line(tmp_path, text, key, line, first):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text)
    with pytest.raises(GpuOpsError) as e:
        mig_config.load_config_file(str(cfg))
    msg = e.value.msg
    assert str(cfg) in msg and "duplicate key %r" % key in msg
    assert "line %d" % line in msg and "line %d" % first in msg


def test_flow_mapping_duplicate_is_refused():
    with pytest.raises(GpuOpsError) as e:
        mig_config.load_config_text('{"version": "v1", "version": "v1"}', "inline.json")
    assert "duplicate key 'version'" in e.value.msg and "inline.json" in e.value.msg


def test_no_duplicates_still_loads():
    data = mig_config.load_config_text("version: v1\nmig-configs:\n  a: [{devices: all, mig-enabled: false}]\n"
                                       "  b: [{devices: all, mig-enabled: false}]\n")
    assert sorted(data["mig-configs"]) == ["a", "b"]


def test_layout_from_a_config_file_warns_with_missing_gpus_warn(tmp_path):
    """The mig role passes a config file's entries as layout with missing_gpus: warn."""
    path = _host(tmp_path)
    layout = [{"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]
    r = _run(path, {"layout": layout, "missing_gpus": "warn"})
    assert r["changed"] and r["absent_gpus"] == [2, 3] and "GPUs present: 0 (h100_80gb), 1 (h100_80gb)" in r["warnings"][0]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("version: v1\nmig-configs:\n  c: [{devices: [5], mig-enabled: false}]\n")
    with pytest.raises(GpuOpsError) as e:
        _run(path, {"config_file": str(cfg), "missing_gpus": "fail"})
    assert "GPU 5" in e.value.msg
