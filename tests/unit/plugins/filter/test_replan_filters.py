# -*- coding: utf-8 -*-
"""Filters of playbooks/replan.yml: gpu_replan_start (the lines shown before the plan) and gpu_replan_nodes' busy
nodes counted from the running pods."""
import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_nodes import gpu_replan_nodes
from ansible_collections.gpuops.k8s.plugins.filter.gpu_replan_start import gpu_replan_start, truncate

PENDING = {
    "pending": [{"name": "llm-1"}, {"name": "llm-2"}],
    "ignored": [{"namespace": "b", "name": "cpu-1", "reason": "phase Running"}],
    "resources": {"nvidia.com/mig-3g.40gb": {"why": "no schedulable node offers it"},
                  "nvidia.com/gpu": {"why": "all 4 offered are taken"}},
    "changes": [{"reason": "a/llm: replicas 1 -> 3 (2 pending)"}],
}


def test_the_lines_in_order():
    rightsized = {"changed": True, "changes": [{"reason": "a/llm: memory_gb 40 -> 10 (p95 8.1)"}]}
    assert gpu_replan_start(PENDING, trigger={"type": "pending"}, rightsized=rightsized) == [
        'trigger: {"type": "pending"}',
        "pending GPU pods: 2, ignored pending GPU pods: 1",
        "nvidia.com/mig-3g.40gb: no schedulable node offers it",
        "nvidia.com/gpu: all 4 offered are taken",
        "right-size: a/llm: memory_gb 40 -> 10 (p95 8.1)",
        "demand: a/llm: replicas 1 -> 3 (2 pending)",
        'ignored: {"namespace": "b", "name": "cpu-1", "reason": "phase Running"}',
    ]


def test_no_trigger_and_a_skipped_rightsize():
    empty = {"pending": [], "ignored": [], "resources": {}, "changes": []}
    skipped = {"skipped": True, "changed": False, "changes": [{"reason": "never shown"}]}
    assert gpu_replan_start(empty, rightsized=skipped) == ["trigger: {}", "pending GPU pods: 0, ignored pending GPU pods: 0"]
    assert gpu_replan_start(empty, trigger={}, rightsized={"changed": False}) == gpu_replan_start(empty)


def test_a_long_trigger_is_cut_as_jinja_truncate_cuts_it():
    assert truncate("x" * 305) == "x" * 305                     # within the 5 characters of leeway
    assert truncate("x" * 306) == "x" * 297 + "..."             # no space: cut at 300 - 3
    words = ("word " * 70).strip()                              # 349 characters
    assert truncate(words) == ("word " * 59).strip() + "..."   # cut at the last space before character 297
    line = gpu_replan_start({"pending": [], "ignored": [], "resources": {}, "changes": []},
                            trigger={"msg": "a " * 400})[0]
    assert line.startswith('trigger: {"msg": "a a') and line.endswith("...") and len(line) <= len("trigger: ") + 300
    assert json.dumps({"msg": "a " * 400}).startswith(line[len("trigger: "):-3])


def test_bad_input_names_what_is_expected():
    with pytest.raises(AnsibleFilterError, match="gpu_pending_demand's result"):
        gpu_replan_start([1, 2])
    with pytest.raises(AnsibleFilterError, match="pending, ignored, resources, changes"):
        gpu_replan_start({"pending": []})


def _pod(name, node, phase="Running", gpus=1, deleting=False):
    meta = {"name": name, "namespace": "a"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    limits = {"nvidia.com/gpu": gpus} if gpus else {"cpu": "1"}
    spec = {"containers": [{"name": "m", "resources": {"limits": limits}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def test_busy_nodes_from_the_running_gpu_pods():
    nodes = [{"name": "n1", "gpus": [{"model": "h100_80gb", "count": 1}], "current": "all-disabled"},
             {"name": "n2", "gpus": [{"model": "h100_80gb", "count": 1}], "current": "all-disabled"}]
    pods = [_pod("a", "n1"), _pod("b", "n1"), _pod("c", "n2", phase="Pending"), _pod("d", "n2", gpus=0),
            _pod("e", "n2", deleting=True), _pod("f", None)]
    out = gpu_replan_nodes(nodes, [], pods=pods)
    # two running GPU pods on n1; on n2 only a pending, a CPU-only and a terminating pod: idle
    assert [(n["name"], n["busy"]) for n in out] == [("n1", 2), ("n2", 0)]
    assert out == gpu_replan_nodes(nodes, [], {"n1": 2})
    # the same count as gpu_pending_demand's busy_nodes, which replan.yml called a second time for it before
    from ansible_collections.gpuops.k8s.plugins.module_utils.plan import pending
    assert out == gpu_replan_nodes(nodes, [], pending.pending_demand(pods)["busy_nodes"])
    with pytest.raises(AnsibleFilterError, match="busy or pods, not both"):
        gpu_replan_nodes(nodes, [], {"n1": 2}, pods=pods)
