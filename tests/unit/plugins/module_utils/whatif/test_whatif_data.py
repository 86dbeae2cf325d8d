# -*- coding: utf-8 -*-
"""Inputs of the what-if engine: openb CSV files and lists, errors with file, line and column."""
import os

import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data

FIX = os.path.join(os.path.dirname(__file__), "fixtures")
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_reads_the_trace_samples():
    nodes = whatif_data.read_nodes_csv(os.path.join(FIX, "openb_nodes_sample.csv"))
    pods = whatif_data.read_pods_csv(os.path.join(FIX, "openb_pods_sample.csv"))
    assert len(nodes) == 25 and sum(n.gpus for n in nodes) == 116
    assert nodes[0] == whatif_data.Node("openb-node-0000", 64000, 262144, 2, "P100", None, {})
    assert len(pods) == 272
    first = pods[0]
    assert (first.name, first.cpu_milli, first.memory_mib, first.num_gpu, first.gpu_milli) == ("openb-pod-0000", 12000, 16384, 1, 1000)
    assert first.gpu_spec == () and first.creation_time == 0.0 and first.qos == "LS"
    spec = whatif_data.read_pods_csv(os.path.join(FIX, "openb_pods_gpuspec_sample.csv"))
    multi = [p.gpu_spec for p in spec if len(p.gpu_spec) > 1]
    assert multi and all(isinstance(s, tuple) for s in multi)
    assert ("V100M16", "V100M32") in multi


def test_multigpu_schema_without_optional_columns(tmp_path):
    path = write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\nx,1000,100,2,1000\ny,500,10,0,0\n")
    pods = whatif_data.read_pods_csv(path)
    assert [(p.num_gpu, p.gpu_milli, p.gpu_spec, p.creation_time) for p in pods] == [(2, 1000, (), None), (0, 0, (), None)]


def test_missing_column_names_file_and_line(tmp_path):
    path = write(tmp_path, "pods.csv", "name,cpu_milli,num_gpu,gpu_milli\nx,1,1,1000\n")
    with pytest.raises(GpuOpsError) as e:
        whatif_data.read_pods_csv(path)
    assert e.value.msg.startswith("%s, line 1: missing column 'memory_mib'" % path)
    assert e.value.details["line"] == 1 and e.value.details["column_name"] == "memory_mib"


def test_non_numeric_cell_names_line_and_column(tmp_path):
    path = write(tmp_path, "pods.csv", POD_HEADER + "a,1000,10,1,500,,LS,Running,0,1,0\nb,1000,lots,1,500,,LS,Running,0,1,0\n")
    with pytest.raises(GpuOpsError) as e:
        whatif_data.read_pods_csv(path)
    assert e.value.msg == "%s, line 3, column 3 (memory_mib): 'lots' is not a number" % path
    assert (e.value.details["line"], e.value.details["column"]) == (3, 3)


def test_gpu_count_zero_with_gpu_milli(tmp_path):
    path = write(tmp_path, "pods.csv", POD_HEADER + "a,1000,10,0,300,,LS,Running,0,1,0\n")
    with pytest.raises(GpuOpsError) as e:
        whatif_data.read_pods_csv(path)
    assert e.value.msg.startswith("%s, line 2, column 5 (gpu_milli): the pod requests no GPU (num_gpu 0) but gpu_milli 300" % path)


@pytest.mark.parametrize("row, message", [
    ("a,1000,10,2,500,,LS,Running,0,1,0", "a multi-GPU pod (num_gpu 2) takes whole GPUs"),
    ("a,1000,10,1,1500,,LS,Running,0,1,0", "1500 is above 1000"),
    ("a,1000,10,1,0,,LS,Running,0,1,0", "requests 1 GPU(s) but gpu_milli 0"),
    ("a,-5,10,1,100,,LS,Running,0,1,0", "-5 is below the minimum 0"),
    ("a,1.5,10,1,100,,LS,Running,0,1,0", "'1.5' is not a whole number"),
    ("a,1000,10,,100,,LS,Running,0,1,0", "a value is required"),
])
def test_bad_pod_cells(tmp_path, row, message):
    path = write(tmp_path, "pods.csv", POD_HEADER + row + "\n")
    with pytest.raises(GpuOpsError) as e:
        whatif_data.read_pods_csv(path)
    assert "%s, line 2, column" % path in e.value.msg and message in e.value.msg


def test_ragged_row_and_empty_files(tmp_path):
    path = write(tmp_path, "pods.csv", POD_HEADER + "a,1000,10\n")
    with pytest.raises(GpuOpsError, match=r"line 2: 3 fields, the header has 11"):
        whatif_data.read_pods_csv(path)
    with pytest.raises(GpuOpsError, match=r"line 1: the file is empty"):
        whatif_data.read_pods_csv(write(tmp_path, "e.csv", ""))
    with pytest.raises(GpuOpsError, match=r"no pods \(only a header\)"):
        whatif_data.read_pods_csv(write(tmp_path, "h.csv", POD_HEADER))
    with pytest.raises(GpuOpsError, match=r"cannot read the pods CSV file"):
        whatif_data.read_pods_csv(str(tmp_path / "absent.csv"))


def test_node_errors(tmp_path):
    head = "sn,cpu_milli,memory_mib,gpu,model\n"
    with pytest.raises(GpuOpsError, match=r"line 2, column 5 \(model\): a node with 8 GPU\(s\) needs a GPU model"):
        whatif_data.read_nodes_csv(write(tmp_path, "n.csv", head + "n1,96000,1024,8,\n"))
    with pytest.raises(GpuOpsError, match=r"line 3, column 1 \(sn\): node n1 is listed twice"):
        whatif_data.read_nodes_csv(write(tmp_path, "n.csv", head + "n1,1,1,0,\nn1,1,1,0,\n"))
    with pytest.raises(GpuOpsError, match=r"line 2, column 4 \(gpu\): 'eight' is not a number"):
        whatif_data.read_nodes_csv(write(tmp_path, "n.csv", head + "n1,96000,1024,eight,G2\n"))
    cpu_node = whatif_data.read_nodes_csv(write(tmp_path, "n.csv", head + "c1,32000,262144,0,nan\n"))[0]
    assert cpu_node.gpus == 0 and cpu_node.model is None


def test_node_lists_planner_and_inventory_formats():
    nodes = whatif_data.nodes_from_list([
        {"name": "a1", "gpus": [{"model": "a100_80gb", "count": 8}], "cpu": "96", "memory": "768Gi", "pods": 110},
        {"gpuops_k8s_node_name": "h1", "gpu_product": "NVIDIA-H100-80GB-HBM3", "gpu_count": 8},
        {"name": "c1", "gpus": [{"model": "a100_80gb", "count": 0}], "cpu_milli": 8000, "memory_mib": 1024},
    ])
    assert nodes[0] == whatif_data.Node("a1", 96000, 768 * 1024, 8, "a100_80gb", 110, {})
    assert (nodes[1].model, nodes[1].gpus, nodes[1].cpu_milli, nodes[1].memory_mib) == ("h100_80gb", 8, None, None)
    assert nodes[2].gpus == 0 and nodes[2].model is None


def test_node_list_errors():
    with pytest.raises(GpuOpsError, match=r"nodes\[0\]\.gpus: holds GPUs of several models \(a100_80gb, l40s_48gb\)"):
        whatif_data.nodes_from_list([{"name": "m", "gpus": [{"model": "a100_80gb", "count": 4}, {"model": "l40s_48gb", "count": 4}]}])
    with pytest.raises(GpuOpsError, match=r"nodes\[1\]\.name: node a is listed twice"):
        whatif_data.nodes_from_list([{"name": "a", "gpus": [{"model": "x", "count": 1}]}, {"name": "a", "gpus": [{"model": "x", "count": 1}]}])
    with pytest.raises(GpuOpsError, match=r"non-empty list"):
        whatif_data.nodes_from_list([])


def test_pod_list():
    pods = whatif_data.pods_from_list([{"cpu_milli": 1000, "memory_mib": 100, "num_gpu": 1, "gpu_milli": 250, "gpu_spec": "T4|P100"},
                                       {"name": "w", "cpu_milli": 1000, "memory_mib": 100, "num_gpu": 4}])
    assert pods[0].name == "pod-00000" and pods[0].gpu_spec == ("P100", "T4")
    assert pods[1].gpu_milli == 1000
    with pytest.raises(GpuOpsError) as e:
        whatif_data.pods_from_list([{"cpu_milli": 1, "memory_mib": 1, "num_gpu": 0, "gpu_milli": 5}])
    assert e.value.msg.startswith("pods[0].gpu_milli: the pod requests no GPU")
    with pytest.raises(GpuOpsError, match=r"pods\[0\]\.memory_mib: missing"):
        whatif_data.pods_from_list([{"cpu_milli": 1, "num_gpu": 0}])
