# -*- coding: utf-8 -*-
"""MIG layouts of the what-if: mig_config forms and errors, planned layouts from a gpu_plan result."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import data as whatif_data, mig

NODES = [whatif_data.Node("a1", 96000, 1 << 20, 2, "a100_80gb", None, {}), whatif_data.Node("t1", 96000, 1 << 20, 2, "T4", None, {}),
         whatif_data.Node("c1", 8000, 1 << 10, 0, None, None, {})]


def names(table, layouts):
    return [[[table.kinds[u].profile for u in gpu] for gpu in node] for node in layouts]


def test_layout_forms():
    table, lay = mig.static_layouts(NODES, {"a100_80gb": "all-balanced", "T4": {"3g.40gb": 2}})
    assert names(table, lay) == [[["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]] * 2, [["3g.40gb", "3g.40gb"]] * 2, []]
    table, lay = mig.static_layouts(NODES, {"*": "all-1g.10gb"})
    assert names(table, lay)[1] == [["1g.10gb"] * 7] * 2  # the T4s shaped like an A100 80GB (explicit assumption)
    table, lay = mig.static_layouts(NODES, {"a100_80gb": [{"devices": "all", "mig-enabled": False},
                                                          {"devices": [1], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]})
    assert names(table, lay) == [[["gpu"], ["gpu"]], [["gpu"], ["gpu"]], []]  # a full-size instance is a whole GPU
    table, lay = mig.static_layouts(NODES, {"a100_80gb": {"1c.3g.40gb": 3, "4g.40gb": 1}})
    assert names(table, lay)[0] == [["4g.40gb"]] * 2  # a GI split into compute instances is not advertised
    table, lay = mig.static_layouts(NODES, {"a100_80gb": "all-disabled"})
    assert names(table, lay)[0] == [["gpu"], ["gpu"]]


def test_request_kind_smallest_fitting_in_compute_and_memory():
    table, lay = mig.static_layouts(NODES, {"a100_80gb": {"1g.10gb": 2, "1g.20gb": 1, "2g.20gb": 1}})
    present = sorted(set(u for gpu in lay[0] for u in gpu))

    def kind(milli):
        return table.kinds[mig.request_kind(table, present, milli)].profile

    assert kind(100) == "1g.10gb"
    assert kind(130) == "1g.20gb"  # 1g.10gb has 1/8 of the memory < 0.13; 1g.20gb has 2/8
    assert kind(200) == "2g.20gb"  # 1g.20gb has only 1/7 of the compute
    assert kind(300) == "gpu" and kind(1000) == "gpu"


def test_mig_config_errors_inline():
    with pytest.raises(GpuOpsError, match=r"mig_config.V100: unknown model V100 in mig_config; the cluster's GPU models are: "
                                          r"T4, a100_80gb"):
        mig.static_layouts(NODES, {"V100": "all-balanced"})
    with pytest.raises(GpuOpsError, match=r"mig_config.a100_80gb: layout \{3g.40gb: 3\} on a100_80gb: 3 x 3g.40gb requested"):
        mig.static_layouts(NODES, {"a100_80gb": {"3g.40gb": 3}})
    with pytest.raises(GpuOpsError, match=r"profile 5g.50gb does not exist on a100_80gb"):
        mig.static_layouts(NODES, {"a100_80gb": {"5g.50gb": 1}})
    with pytest.raises(GpuOpsError, match=r"unknown layout 'half'"):
        mig.static_layouts(NODES, {"*": "half"})
    with pytest.raises(GpuOpsError, match=r"mig_shape 'l40s_48gb' is not a MIG-capable catalog model"):
        mig.static_layouts(NODES, {"T4": "all-balanced"}, mig_shape="l40s_48gb")


def test_mig_config_file_errors_name_line_and_column(tmp_path):
    path = tmp_path / "mig.yml"
    path.write_text("# layouts per model\na100_80gb: all-balanced\n\nV100M16:\n  1g.10gb: 7\n")
    with pytest.raises(GpuOpsError) as e:
        mig.static_layouts(NODES, str(path))
    assert e.value.msg.startswith("%s, line 4, column 1: unknown model V100M16 in mig_config" % path)
    assert (e.value.details["line"], e.value.details["column"]) == (4, 1)
    path.write_text("a100_80gb:\n  3g.40gb: 3\n")
    with pytest.raises(GpuOpsError) as e:
        mig.static_layouts(NODES, str(path))
    assert e.value.msg.startswith("%s, line 2, column 3: layout {3g.40gb: 3}" % path)
    path.write_text("a100_80gb: [unclosed\n")
    with pytest.raises(GpuOpsError, match=r"line 2, column 1: not valid YAML"):
        mig.static_layouts(NODES, str(path))
    path.write_text("a100_80gb: all-balanced\n")
    table, lay = mig.static_layouts(NODES, str(path))
    assert len(lay[0][0]) == 4


PLAN = {"plan": {
    "mig_parted_config": {"version": "v1", "mig-configs": {
        "all-1g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
        "half": [{"devices": [0], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
                 {"devices": [1], "mig-enabled": False}]}},
    "node_configs": [{"node": "a1", "mig_config": "half", "gpus": 2}, {"node": "t1", "mig_config": "all-1g"}],
}}


def test_planned_layouts_from_a_gpu_plan_result():
    table, lay = mig.planned_layouts(NODES, PLAN)
    assert names(table, lay) == [[["3g.40gb", "3g.40gb"], ["gpu"]], [["1g.10gb"] * 7] * 2, []]
    table, lay = mig.planned_layouts(NODES, PLAN["plan"])  # the plan part alone
    assert len(lay[1][0]) == 7


def test_planned_layout_errors():
    bad = {"mig_parted_config": PLAN["plan"]["mig_parted_config"], "node_configs": [{"node": "zz", "mig_config": "half"}]}
    with pytest.raises(GpuOpsError, match=r"plan.node_configs\[0\]: node zz is not in the replayed cluster"):
        mig.planned_layouts(NODES, bad)
    bad = {"mig_parted_config": PLAN["plan"]["mig_parted_config"], "node_configs": [{"node": "a1", "mig_config": "nope"}]}
    with pytest.raises(GpuOpsError, match=r"mig_config 'nope' is not in plan.mig_parted_config; it has: all-1g, half"):
        mig.planned_layouts(NODES, bad)
    with pytest.raises(GpuOpsError, match=r"plan needs mig_parted_config"):
        mig.planned_layouts(NODES, {"node_configs": []})
    with pytest.raises(GpuOpsError, match=r"missing 'version'"):
        mig.planned_layouts(NODES, {"mig_parted_config": {"mig-configs": {}}, "node_configs": []})
