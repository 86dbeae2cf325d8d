"""Unit tests for mig_rollout: rollout planning, last good layout, failure budget."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import rollout as mr
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def node(name, config=None, state=None, annotations=None, alloc=None, unschedulable=False):
    labels = {}
    if config:
        labels[mr.LABEL_CONFIG] = config
    if state:
        labels[mr.LABEL_STATE] = state
    return {"metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
            "spec": {"unschedulable": unschedulable}, "status": {"allocatable": alloc or {}}}


HOSTS = ["a", "b", "c", "d", "e"]


def nodes(**kw):
    return {h: kw.get(h, node(h, "all-1g.10gb", "success")) for h in HOSTS}


def test_canary_then_batches():
    plan = mr.plan_rollout(HOSTS, nodes(), "mixed", canary=1, batch_size=2)
    assert plan["batches"] == [["a"], ["b", "c"], ["d", "e"]]
    assert plan["serial"] == [1, 2]
    assert plan["per_node"]["a"]["canary"] is True
    assert plan["per_node"]["b"]["canary"] is False
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"
    assert plan["per_node"]["c"]["steps"][0].startswith("label nvidia.com/mig.config=mixed")


def test_no_canary():
    plan = mr.plan_rollout(HOSTS, nodes(), "mixed", canary=0, batch_size=3)
    assert plan["batches"] == [["a", "b", "c"], ["d", "e"]]
    assert plan["serial"] == [3]


def test_skips_nodes_already_done_and_canary_is_first_to_change():
    plan = mr.plan_rollout(HOSTS, nodes(a=node("a", "mixed", "success")), "mixed")
    assert plan["skipped"] == [{"node": "a", "reason": "already at mixed (state success)"}]
    assert plan["batches"][0] == ["b"]
    forced = mr.plan_rollout(HOSTS, nodes(a=node("a", "mixed", "success")), "mixed", force=True)
    assert forced["batches"][0] == ["a"]


def test_failed_node_is_retried_with_recorded_last_good():
    failed = node("c", "mixed", "failed", annotations={mr.ANN_LAST_GOOD: "all-1g.10gb"})
    plan = mr.plan_rollout(HOSTS, nodes(c=failed), "mixed")
    assert "c" in plan["nodes"]
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"


def test_unlabelled_node_rolls_back_to_its_inventory_config():
    """A node set up by gpu_nodes.yml carries no mig.config label: its rollback target is the inventory's."""
    bare = {"a": node("a"), "b": node("b"), "c": node("c", "all-1g.10gb", "success")}
    plan = mr.plan_rollout(["a", "b", "c"], bare, "all-disabled",
                           inventory_configs={"a": "h100-mixed", "c": "ignored-label-wins"})
    assert plan["per_node"]["a"]["last_good"] == "h100-mixed"
    assert plan["per_node"]["b"]["last_good"] == "all-disabled"
    assert plan["per_node"]["c"]["last_good"] == "all-1g.10gb"


def test_pending_without_record_falls_back_to_default():
    plan = mr.plan_rollout(["a"], {"a": node("a", "mixed", "pending")}, "mixed")
    assert plan["per_node"]["a"]["last_good"] == "all-disabled"


def test_unknown_config_and_missing_node():
    with pytest.raises(GpuOpsError, match="unknown MIG config 'nope'; the config file defines: all-1g.10gb, mixed"):
        mr.plan_rollout(HOSTS, nodes(), "nope", known_configs=["mixed", "all-1g.10gb"])
    with pytest.raises(GpuOpsError, match="no Kubernetes node for host"):
        mr.plan_rollout(HOSTS, dict(nodes(), b=None), "mixed")
    with pytest.raises(GpuOpsError, match="batch_size >= 1"):
        mr.plan_rollout(HOSTS, nodes(), "mixed", batch_size=0)


def test_budget():
    ns = [node("a", state="failed"), node("b", state="failed"), node("c", state="success")]
    for n, rid in zip(ns, ("r1", "r0", "r1")):
        n["metadata"]["labels"][mr.LABEL_ROLLOUT] = rid
    assert mr.budget_left(ns, "r1", 0) == {"failed": ["a"], "exhausted": True}
    assert mr.budget_left(ns, "r1", 1) == {"failed": ["a"], "exhausted": False}


def test_expected_resources():
    n = node("a", alloc={"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-3g.40gb": "4", "cpu": "64"})
    assert mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 8, "nvidia.com/mig-3g.40gb": 4})
    assert not mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 8})  # stale 3g resource left
    assert not mr.expected_resources_met(n, {"nvidia.com/mig-1g.10gb": 56})


def test_inventory_drift_allows_untouched_and_matching_nodes():
    assert mr.inventory_drift({}, "all-1g.10gb") == ""
    assert mr.inventory_drift(node("a"), "all-1g.10gb") == ""  # set up by gpu_nodes.yml, never rolled out
    assert mr.inventory_drift(node("a", "all-1g.10gb", "success"), "all-1g.10gb") == ""
    # a failed rollout restored the last good layout, which is the inventory's
    assert mr.inventory_drift(node("a", "all-1g.10gb", "failed"), "all-1g.10gb") == ""


def test_inventory_drift_refuses_to_undo_a_rollout():
    msg = mr.inventory_drift(node("gpu-7", "mixed-a100", "success"), "all-1g.10gb", host="gpu7")
    assert "'mixed-a100'" in msg and "'all-1g.10gb'" in msg
    assert "mig_reconfigure.yml -e target=gpu7 -e mig_reconfigure_config=all-1g.10gb" in msg
    assert "gpuops_mig_config: mixed-a100" in msg and "gpu_nodes_mig_guard=false" in msg
    failed = mr.inventory_drift(node("gpu-7", "all-1g.10gb", "failed"), "mixed-a100")
    assert "state failed" in failed and "target=gpu-7" in failed


def test_inventory_drift_refuses_a_node_under_a_rollout():
    n = node("gpu-7", "mixed-a100", "pending")
    n["metadata"]["labels"][mr.LABEL_ROLLOUT] = "r20261202"
    for config in ("mixed-a100", "all-1g.10gb"):
        msg = mr.inventory_drift(n, config)
        assert "middle of a MIG rollout to 'mixed-a100'" in msg and "rollout r20261202" in msg, msg


# ------------------------------------------------------------------ last good configs the file must hold (rollback)

def test_last_good_missing_from_the_config_file_is_refused_naming_node_and_configs():
    """A node set up from the site's file (all-1g.10gb) could not roll back with a file that lacks it."""
    ns = {"a": node("a", "all-1g.10gb", "success"), "b": node("b", "mixed", "success"),
          "c": node("c", "plan-x", "failed", annotations={mr.ANN_LAST_GOOD: "site-7"})}
    with pytest.raises(GpuOpsError) as e:
        mr.plan_rollout(["a", "b", "c"], ns, "plan-y", known_configs=["plan-y", "mixed"])
    msg = e.value.msg
    assert "node a ('all-1g.10gb')" in msg and "node c ('site-7')" in msg, msg
    assert "node b" not in msg
    assert "it defines: mixed, plan-y" in msg
    assert e.value.details["unknown_last_good"] == {"a": "all-1g.10gb", "c": "site-7"}
    assert e.value.details["valid"] == ["mixed", "plan-y"]


def test_last_good_checks_the_inventory_and_default_fallbacks():
    bare = {"a": node("a"), "b": node("b")}
    with pytest.raises(GpuOpsError, match=r"node a \('h100-mixed'\), node b \('all-disabled'\)"):
        mr.plan_rollout(["a", "b"], bare, "mixed", known_configs=["mixed"], inventory_configs={"a": "h100-mixed"})
    plan = mr.plan_rollout(["a", "b"], bare, "mixed", known_configs=["mixed", "h100-mixed", "all-disabled"],
                           inventory_configs={"a": "h100-mixed"})
    assert plan["nodes"] == ["a", "b"]


def test_skipped_nodes_need_no_rollback_name_and_without_known_configs_nothing_is_checked():
    # a is already done (skipped, untouched): its last good config does not matter; b changes and may go back
    ns = {"a": node("a", "plan-y", "success", annotations={mr.ANN_LAST_GOOD: "gone"}),
          "b": node("b", "mixed", "success")}
    plan = mr.plan_rollout(["a", "b"], ns, "plan-y", known_configs=["plan-y", "mixed"])
    assert plan["nodes"] == ["b"] and plan["skipped"][0]["node"] == "a"
    # forced, a changes again: its last good is plan-y itself (label, state success), which the file holds
    assert mr.plan_rollout(["a", "b"], ns, "plan-y", known_configs=["plan-y", "mixed"], force=True)["nodes"] == ["a", "b"]
    assert mr.plan_rollout(["a", "b"], ns, "plan-y", known_configs=None)["nodes"] == ["b"]
    assert mr.plan_rollout(["c"], {"c": node("c", "site-only", "success")}, "plan-y")["per_node"]["c"]["last_good"] == "site-only"


# ------------------------------------------------------------------ what the node advertises after the change

def gpu(index, profiles=None, **kw):
    """One A100 80GB of a mig_partition result: MIG on with ``profiles``, or MIG off when None."""
    return dict({"index": index, "model": "a100_80gb", "mig_capable": True, "mig_mode_current": profiles is not None,
                 "instances": [{"profile": p} for p in profiles or []]}, **kw)


MIG_1G = [gpu(0, ["1g.10gb"] * 7), gpu(1, ["1g.10gb"] * 7)]
NO_MIG = [gpu(0), gpu(1)]


def plugin(default, **configs):
    base = {
        "default": {"version": "v1", "flags": {"migStrategy": "none"}},
        "mixed": {"version": "v1", "flags": {"migStrategy": "mixed"}},
        "single": {"version": "v1", "flags": {"migStrategy": "single"}},
        "ts-renamed": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
            "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
        "ts": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}},
        "mps": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
    }
    base.update(configs)
    return {"default": default, "configs": base}


def plugin_node(alloc, config=None):
    n = node("gpu-1", alloc=alloc)
    if config:
        n["metadata"]["labels"]["nvidia.com/device-plugin.config"] = config
    return n


def test_time_slicing_renamed_advertises_gpu_shared():
    n = plugin_node({"nvidia.com/gpu": "0", "nvidia.com/gpu.shared": "8", "nvidia.com/mig-1g.10gb": "0"}, "ts-renamed")
    check = mr.resources_check(n, NO_MIG, plugin("default"))
    assert check["met"], check["message"]
    assert check["expected"] == {"nvidia.com/gpu.shared": "8"}
    assert check["config"] == "ts-renamed" and check["mig_strategy"] == "none"
    assert check["sharing"] == {"strategy": "time-slicing", "replicas": 4, "resources": {"nvidia.com/gpu": 4},
                                "rename_by_default": True}
    assert check["message"] == ""
    # the old expectation (mig_partition's resources, mixed without sharing) is not what this node advertises
    assert not mr.expected_resources_met(n, {"nvidia.com/gpu": 2})
    # still the MIG layout's slices: not there yet, and the message says both sides
    old = plugin_node({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}, "ts-renamed")
    check = mr.resources_check(old, NO_MIG, plugin("default"))
    assert not check["met"]
    assert check["stale"] == {"nvidia.com/mig-1g.10gb": "14"}
    assert check["message"] == (
        "expected nvidia.com/gpu.shared=8 (device plugin config 'ts-renamed': migStrategy none, time-slicing x4 "
        "for nvidia.com/gpu renamed .shared), the node advertises nvidia.com/gpu=0, nvidia.com/mig-1g.10gb=14 "
        "(left over: nvidia.com/mig-1g.10gb=14)"), check["message"]


def test_time_slicing_not_renamed_is_the_default_config_of_the_daemonset():
    n = plugin_node({"nvidia.com/gpu": "6"})  # no label: the DaemonSet's DEFAULT_CONFIG
    check = mr.resources_check(n, NO_MIG, plugin("ts"))
    assert check["met"] and check["expected"] == {"nvidia.com/gpu": "6"} and check["config"] == "ts"
    assert not mr.resources_check(plugin_node({"nvidia.com/gpu": "2"}), NO_MIG, plugin("ts"))["met"]
    # a label naming no config: the default, as the config-manager falls back
    assert mr.resources_check(plugin_node({"nvidia.com/gpu": "6"}, "nope"), NO_MIG, plugin("ts"))["met"]


def test_mps_replicas():
    check = mr.resources_check(plugin_node({"nvidia.com/gpu": "4"}, "mps"), NO_MIG, plugin("default"))
    assert check["met"] and check["sharing"]["strategy"] == "mps"
    assert "mps x2" in mr.resources_check(plugin_node({"nvidia.com/gpu": "2"}, "mps"), NO_MIG,
                                          plugin("default"))["message"]


def test_mixed_strategy_time_slices_only_the_resources_the_config_lists():
    """The plugin replicates only the listed resources: a mixed node that time-slices nvidia.com/gpu keeps its MIG
    slices single, one that also lists a MIG profile replicates that profile with its own count."""
    gpus = [gpu(0, ["1g.10gb"] * 7), gpu(1)]
    configs = plugin("default", **{
        "mixed-ts-gpu": {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
            "renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
        "mixed-ts-both": {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": {"timeSlicing": {
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4},
                          {"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]}}}})
    check = mr.resources_check(plugin_node({"nvidia.com/gpu.shared": "4", "nvidia.com/mig-1g.10gb": "7"},
                                           "mixed-ts-gpu"), gpus, configs)
    assert check["met"], check["message"]
    assert check["expected"] == {"nvidia.com/gpu.shared": "4", "nvidia.com/mig-1g.10gb": "7"}
    # replicating the slices too (what one replica count for every resource would expect) is not what it shows
    wrong = mr.resources_check(plugin_node({"nvidia.com/gpu.shared": "4", "nvidia.com/mig-1g.10gb": "28"},
                                           "mixed-ts-gpu"), gpus, configs)
    assert not wrong["met"]
    assert "time-slicing x4 for nvidia.com/gpu renamed .shared" in wrong["message"]
    both = mr.resources_check(plugin_node({"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "14"}, "mixed-ts-both"),
                              gpus, configs)
    assert both["met"] and both["expected"] == {"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "14"}


def test_single_strategy_advertises_mig_devices_as_gpu():
    check = mr.resources_check(plugin_node({"nvidia.com/gpu": "14"}, "single"), MIG_1G, plugin("default"))
    assert check["met"] and check["expected"] == {"nvidia.com/gpu": "14"}
    # the mixed names are what mig_partition reports; a single-strategy node never shows them
    assert not mr.resources_check(plugin_node({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}, "single"),
                                  MIG_1G, plugin("default"))["met"]


def test_no_plugin_deployed_keeps_the_mixed_strategy_without_sharing():
    n = plugin_node({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14", "cpu": "64"}, "ts-renamed")
    for deployed in (None, {}, {"default": "gone", "configs": {}}):
        check = mr.resources_check(n, MIG_1G, deployed)
        assert check["met"], check
        assert check["config"] is None and check["mig_strategy"] == "mixed" and check["sharing"] is None
        assert check["expected"] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}
    assert "no device plugin config of gpuops.k8s.device_plugin" in mr.resources_check(
        plugin_node({"nvidia.com/gpu": "2"}), MIG_1G, None)["message"]
    # what mig_partition's resources say (engine.resources) is what the layout gives with the mixed strategy
    assert mr.layout_resources(MIG_1G) == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}


def test_stale_mig_resource_left_is_not_met():
    n = plugin_node({"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14", "nvidia.com/mig-3g.40gb": "2"})
    check = mr.resources_check(n, MIG_1G, None)
    assert not check["met"] and check["stale"] == {"nvidia.com/mig-3g.40gb": "2"}
    assert "left over: nvidia.com/mig-3g.40gb=2" in check["message"]
    # a zero count of a profile no longer there is fine (kubelet keeps the name at 0)
    n["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "0"
    assert mr.resources_check(n, MIG_1G, None)["met"]
    # a stale shared resource after the rename was turned off
    n["status"]["allocatable"]["nvidia.com/gpu.shared"] = "8"
    assert not mr.expected_resources_met(n, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"})


def test_layout_skips_lost_gpus_and_instances_without_compute_instance_and_takes_k8s_info_lists():
    gpus = [gpu(0, ["3g.40gb", "3g.40gb"]), gpu(1, lost=True)]
    gpus[0]["instances"][1]["has_compute_instance"] = False
    assert mr.layout_resources(gpus) == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "1"}
    n = plugin_node({"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "1"})
    assert mr.resources_check([n], gpus, None)["met"]
    missing = mr.resources_check([], gpus, None)
    assert not missing["met"] and missing["message"].startswith("the node is not there")
    assert mr.layout_resources([]) == {}


def test_an_invalid_plugin_config_is_an_error():
    bad = plugin("default", broken={"version": "v1", "flags": {"migStrategy": "weird"}})
    with pytest.raises(GpuOpsError, match="migStrategy"):
        mr.resources_check(plugin_node({}, "broken"), NO_MIG, bad)
