# -*- coding: utf-8 -*-
"""The planner's typed API (plan/api.py): the request parsed once from gpu_plan's parameters, the typed call, the
layouts per GPU in the result."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import api, solver
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand

A100 = "NVIDIA A100-SXM4-80GB"
TIMING = ("solve_seconds", "total_seconds")


def params(**kw):
    p = {"nodes": [{"name": "n1", "gpus": [{"model": A100, "count": 1}]}],
         "demand": [{"tenant": "team-a", "name": "small", "replicas": 2, "memory_gb": 10, "kind": "inference",
                     "isolation": "shared"},
                    {"tenant": "team-a", "name": "big", "replicas": 1, "memory_gb": 35, "kind": "inference",
                     "isolation": "strict"}],
         "solver": "exact"}
    p.update(kw)
    return p


def typed_request(**options):
    model = gpu_catalog.find_model(A100)
    return api.PlanRequest(
        nodes=[api.Node("n1", (model,))],
        items=[api.Item(0, "team-a", "small", 2, 10.0, None, "inference", "shared"),
               api.Item(1, "team-a", "big", 1, 35.0, None, "inference", "strict")],
        options=api.PlanOptions(**dict({"solver": "exact"}, **options)))


def without_timing(result):
    out = dict(result)
    out["summary"] = dict((k, v) for k, v in result["summary"].items() if k not in TIMING)
    return out


def test_two_items_on_one_a100_80gb_by_hand():
    # 10 GB on an A100 80GB: 1g.10gb (1 of 7 compute, 1 of 8 memory slices), the smallest profile with 10 GB;
    # 35 GB strict: 3g.40gb (4 memory slices; 4g.40gb has the same memory and more compute). The exact MILP chooses
    # among the maximal layouts of those two profiles: 7 x 1g.10gb, 2 x 3g.40gb and 3g.40gb + 4 x 1g.10gb (compute
    # 3 + 4 = 7, memory 4 + 4 = 8); only the last holds 2 x 1g.10gb and 1 x 3g.40gb on the one GPU.
    result = solver.plan(typed_request())
    assert result.layouts == {"n1": [(("1g.10gb", 4), ("3g.40gb", 1))]}
    assert result.summary["gpus_used"] == 1 and result.summary["replicas_unplaced"] == 0
    assert result.quotas == {"team-a": {"hard": {"requests.nvidia.com/mig-1g.10gb": 2,
                                                 "requests.nvidia.com/mig-3g.40gb": 1}}}
    assert [i["profile"] for i in result.planned_gpus["n1"][0]["instances"]].count("1g.10gb") == 4
    assert "_planned_gpus" not in result.as_dict() and "layouts" not in result.as_dict()


def test_the_typed_call_gives_the_plan_of_the_parameters_path():
    typed = solver.plan(typed_request()).as_dict()
    parsed = solver.plan(plan_demand.parse_request(params())).as_dict()
    assert without_timing(typed) == without_timing(parsed)
    assert list(typed) == ["summary", "decisions", "placements", "unplaced", "mig_parted_config", "node_configs",
                           "device_plugin_configs", "quotas", "prices"]


def test_parse_request_reads_every_option_once():
    req = plan_demand.parse_request(params(objective="min_gpus", disruption_budget=3, time_limit_s=5, bound=False,
                                           lp_rounding=False, prices={A100: 2.5}, report="/tmp/x"))
    assert req.options == api.PlanOptions("min_gpus", "exact", 3, 5.0, False, False)
    assert req.prices["a100_80gb"] == 2.5
    assert [it.name for it in req.items] == ["small", "big"] and req.items[1].index == 1
    assert req.nodes[0].current == (None,)
    assert plan_demand.parse_request(params(objective=None)).options.objective == "min_cost"


@pytest.mark.parametrize("key, value, message", [
    ("objective", "cheapest", r"objective 'cheapest' is not valid; valid objectives: min_cost, min_gpus"),
    ("solver", "fast", r"solver 'fast' is not valid; valid solvers: auto, exact, heuristic"),
    ("disruption_budget", -1, r"disruption_budget must be >= 0, got -1"),
    ("time_limit_s", 0, r"time_limit_s must be > 0, got 0"),
])
def test_parse_errors_name_the_valid_values(key, value, message):
    with pytest.raises(GpuOpsError, match=message):
        plan_demand.parse_request(params(**{key: value}))
    with pytest.raises(GpuOpsError, match=message):
        api.PlanOptions(**{key: value})


def test_a_node_needs_one_current_layout_per_gpu():
    model = gpu_catalog.find_model(A100)
    with pytest.raises(GpuOpsError, match=r"node n1: current needs one layout per GPU \(2\), got 1"):
        api.Node("n1", (model, model), current=(api.WHOLE,))
