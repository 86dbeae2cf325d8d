"""common.diff: the one builder of a module's diff (named items before/after, or one text before/after)."""
from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import engine as mig_engine
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand


def test_items_on_both_sides_one_side_and_the_order_each_side_keeps():
    t = diff_helper.DiffTracker()
    t.add("node-b", before="mig_config=all-1g.10gb", after="mig_config=all-3g.40gb")
    t.add("node-a", before="mig_config=-")          # dropped by the plan: before only
    t.add("node-c", after="mig_config=all-disabled")  # new in the plan: after only
    t.add("node-a2", before=None, after=None)          # None is a value, not "absent"
    assert t.has_changes()
    assert t.as_dict() == {
        "before": {"node-b": "mig_config=all-1g.10gb", "node-a": "mig_config=-", "node-a2": None},
        "after": {"node-b": "mig_config=all-3g.40gb", "node-c": "mig_config=all-disabled", "node-a2": None}}
    # one "name: value" line per item, in the order added on that side, each side ending with a newline
    assert t.as_text("nodes (current)", "nodes (plan)") == {
        "before": "node-b: mig_config=all-1g.10gb\nnode-a: mig_config=-\nnode-a2: None\n",
        "after": "node-b: mig_config=all-3g.40gb\nnode-c: mig_config=all-disabled\nnode-a2: None\n",
        "before_header": "nodes (current)", "after_header": "nodes (plan)"}


def test_no_change_and_empty():
    t = diff_helper.DiffTracker()
    assert not t.has_changes()
    assert t.as_dict() == {"before": {}, "after": {}}
    assert t.as_text("x") == {"before": "\n", "after": "\n", "before_header": "x", "after_header": "x"}
    t.add("gpu0", before={"mig": True}, after={"mig": True})
    assert not t.has_changes()
    t.add("gpu0", after={"mig": False})  # a later add replaces that side's value
    assert t.has_changes()
    assert t.as_dict() == {"before": {"gpu0": {"mig": True}}, "after": {"gpu0": {"mig": False}}}


def test_the_copies_are_not_the_tracker():
    t = diff_helper.DiffTracker()
    t.add("a", before=1, after=2)
    d = t.as_dict()
    d["before"]["b"] = 3
    assert t.as_dict()["before"] == {"a": 1}


def test_text_diff_headers():
    assert diff_helper.text_diff("", "# Plan\n", "/r/plan.md") == {
        "before": "", "after": "# Plan\n", "before_header": "/r/plan.md", "after_header": "/r/plan.md"}
    assert diff_helper.text_diff("a\n", "b\n", "old", "new")["after_header"] == "new"


def test_the_planner_nodes_diff_goes_through_it():
    nodes = [{"name": "n1", "current": "all-1g.10gb", "labels": {"nvidia.com/device-plugin.config": "n1-cfg"}},
             {"name": "n2", "current": {"1g.10gb": 7}}, {"name": "n3"}]
    result = {"node_configs": [{"node": "n1", "mig_config": "all-3g.40gb", "device_plugin_config": None},
                               {"node": "n2", "mig_config": None, "device_plugin_config": "n2-cfg"}]}
    assert demand.nodes_diff(nodes, result) == {
        "before": "n1: mig_config=all-1g.10gb device_plugin_config=n1-cfg\n"
                  "n2: mig_config=custom device_plugin_config=-\n"
                  "n3: mig_config=- device_plugin_config=-\n",
        "after": "n1: mig_config=all-3g.40gb device_plugin_config=-\n"
                 "n2: mig_config=- device_plugin_config=n2-cfg\n",
        "before_header": "nodes (current)", "after_header": "nodes (plan)"}


def test_the_mig_engine_diff_goes_through_it():
    before = [{"index": 0, "uuid": "GPU-a", "mig_mode_current": False, "instances": []},
              {"index": 1, "uuid": None, "mig_mode_current": False, "instances": []},
              {"index": 2, "uuid": "GPU-c", "mig_mode_current": False, "instances": []}]
    after = [dict(before[0], mig_mode_current=True), dict(before[1]), dict(before[2])]
    d = mig_engine._diff(before, after, {0, 1})
    # GPU 2 is not among the changed indexes; a GPU without a uuid is named by its index
    assert sorted(d["before"]) == ["1", "GPU-a"] and sorted(d["after"]) == ["1", "GPU-a"]
    assert d["before"]["GPU-a"] != d["after"]["GPU-a"] and d["before"]["1"] == d["after"]["1"]
