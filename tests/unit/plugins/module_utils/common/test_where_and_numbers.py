"""common.where.Where (the one place-of-a-value helper) and common.validation.number (the one number checker)."""
import math

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config


def test_file_position():
    w = Where("mig.yml", 4, 1)
    assert w.text() == "mig.yml, line 4, column 1"
    with pytest.raises(GpuOpsError) as e:
        w.fail("unknown model V100M16", model="V100M16")
    assert e.value.msg == "mig.yml, line 4, column 1: unknown model V100M16"
    assert e.value.details == {"model": "V100M16", "source": "mig.yml", "line": 4, "column": 1}


def test_csv_cell_names_line_column_number_and_name():
    w = Where("pods.csv", 3, header=["name", "cpu_milli", "memory_mib"])
    assert w.text("memory_mib") == "pods.csv, line 3, column 3 (memory_mib)"
    assert w.text("gpu_milli") == "pods.csv, line 3"  # not in the header: the line only
    assert w.details("memory_mib") == {"source": "pods.csv", "line": 3, "column": 3, "column_name": "memory_mib"}


def test_option_path_and_named():
    assert Where("pods[3]").text("cpu_milli") == "pods[3].cpu_milli"
    assert Where("plan", path="plan.node_configs[2]").text() == "plan.node_configs[2]"
    assert Where("site.yaml", path="mig-configs[a][0]").named() == "site.yaml: mig-configs[a][0]"
    assert Where("layout", path="").named() == "layout"


@pytest.mark.parametrize("value, kwargs, expected", [
    ("3", {"integer": True}, 3),
    (2.0, {"integer": True}, 2),
    (" 7 ", {"integer": True, "minimum": 0}, 7),
    ("0.5", {}, 0.5),
    (1, {"minimum": 0, "strict_min": True}, 1.0),
])
def test_number_accepts(value, kwargs, expected):
    got = validation.number(value, "x", **kwargs)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value, kwargs, message", [
    (True, {}, "x must be a number, got True"),
    (None, {"integer": True}, "x must be an integer, got None"),
    (1.5, {"integer": True}, "x must be an integer, got 1.5"),
    ("abc", {}, "x must be a number, got 'abc'"),
    (float("inf"), {}, "x must be a finite number, got inf"),
    (math.nan, {}, "x must be a finite number, got nan"),
    (-1, {"integer": True, "minimum": 0}, "x must be >= 0, got -1"),
    (0, {"minimum": 0, "strict_min": True}, "x must be > 0, got 0"),
    (9, {"integer": True, "maximum": 8}, "x must be <= 8, got 9"),
])
def test_number_refuses_with_the_bound(value, kwargs, message):
    with pytest.raises(GpuOpsError) as e:
        validation.number(value, "x", **kwargs)
    assert e.value.msg == message


def test_integer_is_number_integer():
    assert validation.integer("4", "replicas", minimum=2) == 4
    with pytest.raises(GpuOpsError, match="replicas must be >= 2, got 1"):
        validation.integer(1, "replicas", minimum=2)


def test_one_yaml_reader_marks_and_errors(tmp_path):
    f = tmp_path / "m.yml"
    f.write_text("A100:\n  1g.10gb: 7\nH100: all-balanced\n")
    data, marks = mig_config.load_config_text(mig_config.read_config_text(str(f)), str(f), marks=True)
    assert data == {"A100": {"1g.10gb": 7}, "H100": "all-balanced"}
    assert marks["H100"] == (3, 1) and marks[("A100", "value")] == (2, 3)
    with pytest.raises(GpuOpsError, match=r"m2.yml, line 2, column 2: not valid YAML: expected .,. or .\]."):
        mig_config.load_config_text("a: [1\nb: 2\n", "m2.yml")
    with pytest.raises(GpuOpsError, match="duplicate key 'a'"):
        mig_config.load_config_text("a: 1\na: 2\n", "m3.yml", marks=True)
    bad = tmp_path / "bin.yml"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(GpuOpsError, match="is not UTF-8 text"):
        mig_config.read_config_text(str(bad))
