# -*- coding: utf-8 -*-
"""The fleet planner on hand-checked cases: decisions, bounds, infeasible and boundary demand, churn, outputs."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.k8s import device_plugin
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import quotas
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import demand as plan_demand, packing, solver

A100 = "NVIDIA A100-SXM4-80GB"
A100_40 = "NVIDIA A100-SXM4-40GB"
H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"
# "greedy": the heuristic without its LP rounding (what runs where scipy is missing)
SOLVERS = ["exact", "heuristic", "greedy"]


def node(name, model, count=8, current=None):
    n = {"name": name, "gpus": [{"model": model, "count": count}]}
    if current is not None:
        n["current"] = current
    return n


def item(tenant, name, replicas, memory_gb, kind="inference", isolation="shared", **kw):
    d = {"tenant": tenant, "name": name, "replicas": replicas, "memory_gb": memory_gb, "kind": kind,
         "isolation": isolation}
    d.update(kw)
    return d


def run(nodes, items, **kw):
    params = {"nodes": nodes, "demand": items}
    params.update(kw)
    if params.get("solver") == "greedy":
        params.update(solver="heuristic", lp_rounding=False)
    return solver.plan(plan_demand.parse_request(params)).as_dict()


def decision(res, name):
    return [d for d in res["decisions"] if d["name"] == name][0]


def gpu_units(res):
    """{(node, gpu): [(name, slice, replicas)]} from the placements."""
    out = {}
    for p in res["placements"]:
        out.setdefault((p["node"], p["gpu"]), []).append((p["name"], p["slice"], p["replicas"]))
    return out


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_fourteen_1g_replicas_fill_two_a100s(solver_name):
    # 7 x 1g.10gb per A100 80GB: 14 strict replicas of 9 GB need exactly 2 GPUs, and the bound says so
    res = run([node("a", A100, 4)], [item("team-a", "chat", 14, 9, isolation="strict")], solver=solver_name)
    s = res["summary"]
    assert s["gpus_used"] == 2 and s["lower_bound_gpus"] == 2 and s["gap_pct"] == 0
    assert s["cost_per_hour"] == 7.0 and s["one_gpu_per_replica"] == {"gpus": 14, "cost_per_hour": 49.0}
    assert s["allocation_pct"] == 100.0 and s["gpus_saved_pct"] == 85.71
    d = decision(res, "chat")
    assert d["mode"] == "mig" and d["resource"] == "nvidia.com/mig-1g.10gb" and d["placed"] == 14
    assert res["quotas"] == {"team-a": {"hard": {"requests.nvidia.com/mig-1g.10gb": 14}}}
    # the two idle GPUs are not listed: mig-parted leaves them as they are
    assert list(res["mig_parted_config"]["mig-configs"].values()) == [
        [{"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]]
    starts = sorted(st for p in res["placements"] for st in p["starts"])
    assert starts == sorted(list(range(7)) * 2)


def test_whole_node_same_layout_gets_a_standard_name():
    res = run([node("a", A100, 2)], [item("team-a", "chat", 14, 9, isolation="strict")], solver="exact")
    assert res["mig_parted_config"] == {"version": "v1", "mig-configs": {
        "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    assert res["node_configs"][0]["labels"] == {"nvidia.com/mig.config": "all-1g.10gb",
                                                "nvidia.com/device-plugin.config": "plan-mig-mixed"}


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_100_gb_on_one_device_is_unplaced_with_the_limit(solver_name):
    res = run([node("a", A100, 2), node("h", H100, 2)],
              [item("team-a", "big", 3, 100, kind="training"), item("team-a", "ok", 1, 80, kind="training")],
              solver=solver_name)
    assert res["unplaced"] == [{"tenant": "team-a", "name": "big", "replicas": 3,
                                "reason": "needs 100 GB on one device; the largest device in the fleet (a100_80gb) has 80 GB"}]
    # the boundary: exactly 80 GB fits one 80 GB device, as a whole GPU
    ok = decision(res, "ok")
    assert ok["placed"] == 1 and ok["mode"] == "exclusive" and ok["resource"] == "nvidia.com/gpu"
    assert res["summary"]["replicas_unplaced"] == 3 and res["summary"]["gpus_used"] == 1


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_l40s_never_gets_mig(solver_name):
    res = run([node("l", L40S, 4)],
              [item("t", "strict", 2, 10, isolation="strict"), item("t", "inf", 9, 10), item("t", "dev", 3, 20, kind="dev")],
              solver=solver_name)
    assert res["mig_parted_config"]["mig-configs"] == {}
    assert all(nc["mig_config"] is None for nc in res["node_configs"])
    assert all(p["slice"] in ("whole", "shared") for p in res["placements"])
    assert decision(res, "strict")["mode"] == "exclusive"
    assert decision(res, "inf")["mode"] == "time-slicing"
    # one sharing mode per node: the strict replicas are on a node without time-slicing
    ts_nodes = set(nc["node"] for nc in res["node_configs"] if nc["sharing"] == "time-slicing")
    assert not [p for p in res["placements"] if p["name"] == "strict" and p["node"] in ts_nodes]


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_strict_is_never_time_sliced_or_mps(solver_name):
    nodes = [node("a", A100, 2), node("l1", L40S, 2), node("l2", L40S, 2), node("h", H100, 2)]
    items = [item("t", "s-inf", 6, 20, isolation="strict"), item("t", "s-train", 2, 30, kind="training", isolation="strict"),
             item("t", "shared", 8, 8), item("t", "train", 2, 20, kind="training")]
    res = run(nodes, items, solver=solver_name)
    sharing = dict((nc["node"], nc["sharing"]) for nc in res["node_configs"])
    for p in res["placements"]:
        if p["name"].startswith("s-"):
            assert sharing[p["node"]] in ("mig", "exclusive") and p["slice"] != "shared"
    for d in res["decisions"]:
        if d["isolation"] == "strict":
            assert set(b["mode"] for b in d["by_model"]) <= {"mig", "exclusive"}
    assert res["summary"]["replicas_unplaced"] == 0


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_time_sliced_and_mps_replicas_fit_the_gpu_memory(solver_name):
    res = run([node("l", L40S, 4), node("m", L40S, 4)],
              [item("t", "a", 7, 20), item("t", "b", 5, 9), item("t", "train", 5, 15, kind="training")],
              solver=solver_name)
    mem = {"a": 20, "b": 9, "train": 15}
    for units in gpu_units(res).values():
        assert sum(mem[n] * r for n, sl, r in units) <= 48
    mps = [d for d in res["decisions"] if d["name"] == "train"][0]
    assert mps["mode"] == "mps" and "3 clients" in mps["reason"]
    modes = set(nc["sharing"] for nc in res["node_configs"] if nc["gpus_used"])
    assert modes == {"time-slicing", "mps"}
    for cfg in res["device_plugin_configs"].values():
        assert ("timeSlicing" in cfg.get("sharing", {})) + ("mps" in cfg.get("sharing", {})) <= 1


def test_min_cost_and_min_gpus_choose_different_models():
    nodes = [node("a", A100, 4), node("l", L40S, 4)]
    items = [item("t", "inf", 8, 20)]
    cost = run(nodes, items, solver="exact")
    gpus = run(nodes, items, solver="exact", objective="min_gpus")
    # 20 GB: 2 per L40S (1.5 USD) = 0.75/replica; 4 x 1g.20gb per A100 (3.5 USD) = 0.875/replica
    assert cost["summary"]["gpus_used"] == 4 and cost["summary"]["cost_per_hour"] == 6.0
    assert gpus["summary"]["gpus_used"] == 2 and gpus["summary"]["cost_per_hour"] == 7.0
    assert decision(gpus, "inf")["resource"] == "nvidia.com/mig-1g.20gb"


def test_prices_override_the_catalog():
    nodes = [node("a", A100, 4), node("l", L40S, 4)]
    res = run(nodes, [item("t", "inf", 8, 20)], solver="exact", prices={L40S: 5.0})
    assert res["summary"]["gpus_used"] == 2 and res["prices"]["l40s_48gb"] == 5.0


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_not_enough_gpus_unplaces_the_lowest_priority_with_the_reason(solver_name):
    res = run([node("a", A100, 1)],
              [item("t", "low", 7, 9, priority=0), item("t", "high", 7, 9, priority=10)], solver=solver_name)
    assert decision(res, "high")["placed"] == 7 and decision(res, "low")["placed"] == 0
    assert res["unplaced"][0]["name"] == "low" and "not enough GPUs" in res["unplaced"][0]["reason"]


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_multi_gpu_replicas_stay_on_one_node(solver_name):
    res = run([node("a", A100, 4), node("b", A100, 8)],
              [item("t", "ddp", 1, 70, kind="training", gpus_per_replica=8),
               item("t", "two", 2, 40, kind="training", gpus_per_replica=2)],
              solver=solver_name)
    ddp = [p for p in res["placements"] if p["name"] == "ddp"]
    assert len(ddp) == 8 and set(p["node"] for p in ddp) == {"b"}
    assert res["quotas"]["t"]["hard"] == {"requests.nvidia.com/gpu": 12}
    too_big = run([node("a", A100, 4)], [item("t", "ddp", 1, 70, kind="training", gpus_per_replica=8)],
                  solver=solver_name)
    assert "needs 8 a100_80gb GPUs on one node; the largest node has 4" in too_big["unplaced"][0]["reason"]


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_planned_layouts_are_placeable_and_the_outputs_load(solver_name):
    nodes = [node("a%d" % i, A100, 8) for i in range(2)] + [node("b", A100_40, 4), node("h", H100, 4), node("l", L40S, 4)]
    items = [item("t1", "chat", 9, 9, isolation="strict"), item("t1", "rag", 5, 18), item("t2", "mid", 4, 35),
             item("t2", "tr", 3, 30, kind="training"), item("t3", "nb", 6, 4, kind="dev"), item("t3", "l", 2, 60)]
    res = run(nodes, items, solver=solver_name)
    configs = mig_config.parse_spec(res["mig_parted_config"])
    by_node = dict((n["name"], n) for n in nodes)
    for nc in res["node_configs"]:
        if not nc["mig_config"]:
            continue
        model = gpu_catalog.find_model(by_node[nc["node"]]["gpus"][0]["model"])
        gpus = [{"index": i, "mig_capable": True} for i in range(by_node[nc["node"]]["gpus"][0]["count"])]
        for d in mig_config.resolve(configs[nc["mig_config"]], gpus).values():
            if d.mig_enabled:
                targets = mig_plan.targets_from_mig_devices(d.mig_devices, model.profiles, model.key)
                mig_plan.validate_targets(targets, model.profiles)
    device_plugin.validate_device_plugin(res["device_plugin_configs"], "plan-mig-mixed"
                                         if "plan-mig-mixed" in res["device_plugin_configs"] else
                                         sorted(res["device_plugin_configs"])[0])
    tenants = plan_demand.tenants_from_plan(res)
    quotas.validate_tenants(tenants)
    assert all(k.startswith("requests.") for q in res["quotas"].values() for k in q["hard"])
    # quotas are what the plan gives: per tenant the placed replicas
    for tenant, q in res["quotas"].items():
        placed = sum(d["placed"] * (1 if d["name"] != "x" else 1) for d in res["decisions"] if d["tenant"] == tenant)
        assert sum(q["hard"].values()) == placed
    assert res["summary"]["replicas_unplaced"] == 0
    assert res["summary"]["gpus_used"] >= res["summary"]["lower_bound_gpus"]


def test_exact_is_never_worse_than_the_heuristic():
    nodes = [node("a", A100, 8), node("l", L40S, 4), node("h", H100, 4)]
    items = [item("t1", "chat", 11, 9, isolation="strict"), item("t1", "rag", 5, 18), item("t2", "mid", 3, 35),
             item("t2", "tr", 3, 30, kind="training"), item("t3", "nb", 9, 4, kind="dev")]
    exact = run(nodes, items, solver="exact")
    heur = run(nodes, items, solver="heuristic")
    assert exact["summary"]["status"] == "optimal"
    assert exact["summary"]["cost_per_hour"] <= heur["summary"]["cost_per_hour"] + 1e-9
    assert exact["summary"]["lower_bound_cost_per_hour"] <= exact["summary"]["cost_per_hour"] + 1e-6


def test_auto_picks_exact_for_small_and_heuristic_for_large_fleets():
    small = run([node("a", A100, 8)], [item("t", "x", 3, 9)])
    big = run([node("a%d" % i, A100, 8) for i in range(40)], [item("t", "x", 3, 9)])
    assert small["summary"]["solver"] == "exact" and big["summary"]["solver"] == "heuristic"


def _replan_fleet():
    return [node("a%02d" % i, A100, 8) for i in range(8)] + [node("h%02d" % i, H100, 8) for i in range(4)]


def _mix(scale=1.0):
    base = [("t1", "chat", 60, 9, "strict"), ("t1", "rag", 24, 18, "shared"), ("t2", "mid", 10, 35, "shared"),
            ("t2", "emb", 40, 4, "shared"), ("t3", "big", 6, 70, "shared")]
    return [item(t, n, int(round(r * (scale if n in ("chat", "emb") else 1.0))), m, isolation=iso)
            for t, n, r, m, iso in base]


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_replan_after_a_10_pct_demand_change_reconfigures_at_most_15_pct(solver_name):
    nodes = _replan_fleet()
    first = run(nodes, _mix(), solver=solver_name)
    current = dict((nc["node"], nc["mig_config"]) for nc in first["node_configs"])
    nodes2 = [dict(n, current=current[n["name"]]) if current[n["name"]] else n for n in nodes]
    for scale in (1.1, 0.9):
        second = run(nodes2, _mix(scale), solver=solver_name, current_configs=first["mig_parted_config"])
        assert second["summary"]["replicas_unplaced"] == 0
        assert second["summary"]["reconfigured_gpus"] <= 0.15 * second["summary"]["gpus_used"], second["summary"]
    same = run(nodes2, _mix(), solver=solver_name, current_configs=first["mig_parted_config"])
    # the same demand again changes no known layout; nodes whose every GPU had a layout keep their config
    assert same["summary"]["reconfigured_gpus"] == 0
    configs = first["mig_parted_config"]["mig-configs"]
    full = [nc["node"] for nc in first["node_configs"] if nc["mig_config"] and configs[nc["mig_config"]][0]["devices"] == "all"]
    assert all(nc["mig_config"] == current[nc["node"]] for nc in same["node_configs"] if nc["node"] in full)


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_disruption_budget_zero_keeps_every_layout(solver_name):
    nodes = [node("a", A100, 2, current="all-balanced")]
    res = run(nodes, [item("t", "chat", 14, 9, isolation="strict")], solver=solver_name, disruption_budget=0)
    # all-balanced is 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb: the 1g slices serve 4 replicas, the rest needs a change
    assert res["summary"]["reconfigured_gpus"] == 0
    assert decision(res, "chat")["placed"] == 4
    assert "disruption_budget 0" in res["unplaced"][0]["reason"] or "not enough GPUs" in res["unplaced"][0]["reason"]
    free = run(nodes, [item("t", "chat", 14, 9, isolation="strict")], solver=solver_name)
    assert free["summary"]["reconfigured_gpus"] == 2 and decision(free, "chat")["placed"] == 14


def test_text_diagram_and_allocation():
    # 3 x 1g.10gb + 2 x 1g.20gb fit one A100 (5 compute, 7 memory slices): cheaper than adding an L40S
    res = run([node("a", A100, 1), node("l", L40S, 1)], [item("t", "x", 3, 9, isolation="strict"), item("t", "y", 2, 20)],
              solver="exact")
    s = res["summary"]
    assert s["gpus_used"] == 1 and s["cost_per_hour"] == 3.5
    assert "1g.20gb          |1g.10gb |1g.10gb |1g.10gb" in s["slice_diagram"]
    assert s["by_model"]["a100_80gb"]["allocation_pct"] == 71.43
    ts = run([node("l", L40S, 1)], [item("t", "y", 2, 20)], solver="exact")
    assert ts["summary"]["by_model"]["l40s_48gb"]["allocation_pct"] == 83.33
    assert ts["device_plugin_configs"] == {"plan-ts-2": {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {
        "timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                        "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}}


# -- bad input -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes,items,kw,message", [
    ([node("a", "NVIDIA A200")], [], {}, "unknown GPU model 'NVIDIA A200'; valid models (NVML names): "),
    ([node("a", A100)], [item("t", "x", -1, 9)], {}, "replicas must be >= 0, got -1"),
    ([node("a", A100)], [item("t", "x", 1.5, 9)], {}, "replicas must be an integer"),
    ([node("a", A100)], [item("t", "x", 1, 0)], {}, "memory_gb must be > 0"),
    ([node("a", A100)], [item("t", "x", 1, 9, kind="batch")], {}, "valid kinds: inference, training, dev"),
    ([node("a", A100)], [item("t", "x", 1, 9, isolation="full")], {}, "valid values: strict, shared"),
    ([node("a", A100)], [item("T_A", "x", 1, 9)], {}, "must be a Kubernetes namespace name"),
    ([node("a", A100)], [item("t", "x", 1, 9, compute=1.5)], {}, "use gpus_per_replica for more"),
    ([node("a", A100)], [item("t", "x", 1, 9, colour="red")], {}, "unknown keys colour; valid keys: tenant"),
    ([node("a", A100)], [item("t", "x", 1, 9), item("t", "x", 1, 9)], {}, "t/x is listed twice"),
    ([node("a", A100)], [item("t", "x", 1, 9)], {"prices": {"team-a": 2.0}},
     "prices: 'team-a' is not a GPU model; valid keys: the fleet's models a100_80gb"),
    ([node("a", A100)], [item("t", "x", 1, 9)], {"objective": "cheap"}, "valid objectives: min_cost, min_gpus"),
    ([node("a", A100)], [item("t", "x", 1, 9)], {"solver": "fast"}, "valid solvers: auto, exact, heuristic"),
    ([node("a", A100, current="all-9g.99gb")], [], {}, "neither a standard name"),
    ([node("a", A100, current={"1g.11gb": 1})], [], {}, "valid profiles: 1g.10gb"),
    ([node("a", L40S, current={"1g.10gb": 1})], [], {}, "does not support MIG"),
    ([node("a", A100), node("a", A100)], [], {}, "node a is listed twice"),
    ([], [], {}, "nodes must be a non-empty list"),
])
def test_bad_input_names_the_valid_choices(nodes, items, kw, message):
    with pytest.raises(GpuOpsError) as e:
        run(nodes, items, **kw)
    assert message in e.value.msg


def test_zero_replicas_and_empty_demand():
    res = run([node("a", A100, 2)], [item("t", "x", 0, 9)])
    assert res["summary"]["gpus_used"] == 0 and res["unplaced"] == [] and decision(res, "x")["placed"] == 0
    assert res["quotas"] == {} and res["mig_parted_config"] == {"version": "v1", "mig-configs": {}}


# -- helpers ------------------------------------------------------------------------------------------------------

def test_nodes_from_gpu_info_facts_and_inventory_hostvars():
    facts = {"n1": {"gpus": [
        {"index": 0, "model": "a100_80gb", "name": A100, "mig_capable": True, "mig_mode_current": True,
         "instances": [{"profile": "3g.40gb", "gpu_instance_id": 1}, {"profile": "1c.3g.40gb", "gpu_instance_id": 2},
                       {"profile": "1c.3g.40gb", "gpu_instance_id": 2}]},
        {"index": 1, "model": "a100_80gb", "name": A100, "mig_capable": True, "mig_mode_current": False, "instances": []},
        {"index": 2, "model": "l40s_48gb", "name": L40S, "mig_capable": False, "mig_mode_current": False}]}}
    nodes = plan_demand.nodes_from_facts(facts)
    assert nodes == [{"name": "n1", "gpus": [{"model": "a100_80gb", "count": 2}, {"model": "l40s_48gb", "count": 1}],
                      "current": [{"3g.40gb": 2}, "all-disabled", None]}]
    parsed = plan_demand.parse_nodes(nodes)
    assert parsed[0].current == ((("3g.40gb", 2),), (), None)
    hv = {"kwok-a100-0": {"gpuops_k8s_node_name": "kwok-a100-0", "gpu_product": "NVIDIA-A100-SXM4-80GB", "gpu_count": 8,
                          "mig_config": "all-balanced"},
          "cpu-0": {"gpuops_k8s_node_name": "cpu-0", "gpu_product": None, "gpu_count": 0}}
    assert plan_demand.nodes_from_hostvars(hv) == [{"name": "kwok-a100-0", "gpus": [{"model": A100, "count": 8}],
                                                    "current": "all-balanced"}]


def test_tenants_from_plan_keep_other_fields():
    plan = {"plan": {"quotas": {"t": {"hard": {"requests.nvidia.com/gpu": 2}}}}}
    base = [{"name": "t", "labels": {"a": "b"}, "quota": {"hard": {"requests.cpu": "8", "requests.nvidia.com/gpu": 9}}},
            {"name": "other"}]
    assert plan_demand.tenants_from_plan(plan, base) == [
        {"name": "other"},
        {"name": "t", "labels": {"a": "b"}, "quota": {"hard": {"requests.cpu": "8", "requests.nvidia.com/gpu": 2}}}]


def test_enumerated_layouts_are_valid_and_maximal():
    model = gpu_catalog.CATALOG["a100_80gb"]
    names = ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"]
    layouts = packing.enumerate_layouts(model, names)
    assert (("1g.10gb", 7),) in layouts and (("3g.40gb", 1), ("4g.40gb", 1)) in layouts
    for lay in layouts:
        assert packing.valid_layout(model, lay)
        for n in names:
            d = dict(lay)
            d[n] = d.get(n, 0) + 1
            assert not packing.valid_layout(model, tuple(sorted(d.items())))
    # 4g + 3g + 1g needs 8 compute slices (7 exist); 2 x 3g + 1g needs 9 memory slices (8 exist)
    assert not packing.valid_layout(model, (("1g.10gb", 1), ("3g.40gb", 1), ("4g.40gb", 1)))
    assert not packing.valid_layout(model, (("1g.10gb", 1), ("3g.40gb", 2)))
    assert packing.valid_layout(model, (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)))


@pytest.mark.parametrize("solver_name", SOLVERS)
def test_many_distinct_time_sliced_shapes_stay_tractable(solver_name):
    # 20 shapes of 2-21 GB with their own compute shares: the exact pattern search is capped, every replica is placed
    items = [item("t", "s%d" % k, 2, 2 + k, compute=0.02 + 0.01 * k) for k in range(20)]
    res = run([node("l%d" % i, L40S, 8) for i in range(4)], items, solver=solver_name)
    assert res["summary"]["replicas_unplaced"] == 0
    for units in gpu_units(res).values():
        assert sum((2 + int(n[1:])) * r for n, sl, r in units) <= 48
        assert sum((0.02 + 0.01 * int(n[1:])) * r for n, sl, r in units) <= 1 + 1e-9


def test_a_current_layout_with_compute_instance_profiles_is_kept_and_drawn():
    """A node whose GPU holds 1c.3g.40gb x 3 (one 3g.40gb GPU instance with three compute instances) today:
    the plan keeps that GPU as it is (its config keeps the compute-instance profile) and draws it as its GIs."""
    configs = {"version": "v1", "mig-configs": {"site-mixed": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "1c.3g.40gb": 3}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}}
    res = run([node("h100", "h100_80gb", count=2, current="site-mixed")],
              [item("t", "x", 4, 9, isolation="strict")], current_configs=configs)
    assert decision(res, "x")["placed"] == 4
    entries = {tuple(e["devices"]): e["mig-devices"] for e in next(iter(res["mig_parted_config"]["mig-configs"].values()))}
    assert entries[(0,)] == {"4g.40gb": 1, "1c.3g.40gb": 3}
    assert res["summary"]["reconfigured_gpus"] == 0
    gpu0 = [line for line in res["summary"]["slice_diagram"].splitlines() if "GPU0" in line][0]
    assert "4g.40gb" in gpu0 and "3g.40gb" in gpu0
