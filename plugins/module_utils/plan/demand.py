# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's inputs: nodes, demand, prices and options, validated with errors that name the valid choices.

* :func:`parse_nodes` - ``[{name, gpus: [{model, count}], labels?, current?, busy?}]``; ``model`` an NVML name, a catalog
  key or a PCI id; ``current`` the node's MIG layout today: a mig.config name (``all-disabled``, ``all-balanced``,
  ``all-<profile>`` or a config of ``current_configs``), a mapping profile -> count (every MIG GPU), or a list with
  one of those (or null) per GPU.
* :func:`parse_demand` - ``[{tenant, name, replicas, memory_gb, compute?, kind, isolation, priority?,
  gpus_per_replica?, resource?}]`` (``resource``: the one extended resource the item's pods request).
* :func:`nodes_from_facts` / :func:`nodes_from_hostvars` - the node list from gpu_info facts per host, or from the
  host vars of the gpuops.k8s.gpu_nodes inventory plugin (the filters ``gpu_plan_nodes`` and
  ``gpu_plan_tenants`` call them).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, NoReturn, Optional, cast

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import resources
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.common import diff as diff_helper
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import (  # noqa: F401  (Node, Item: re-exported)
    WHOLE, Item, Layout, Node, PlanOptions, PlanRequest, Prices)

KINDS = ("inference", "training", "dev")
ISOLATIONS = ("strict", "shared")
DEMAND_KEYS = ("tenant", "name", "replicas", "memory_gb", "compute", "kind", "isolation", "priority",
               "gpus_per_replica", "resource")
NODE_KEYS = ("name", "gpus", "labels", "current", "busy")
PLAN_KEYS = ("nodes", "demand", "objective", "prices", "disruption_budget", "solver", "time_limit_s",
             "current_configs", "bound", "lp_rounding")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _fail(msg: str, **details: Any) -> NoReturn:
    raise GpuOpsError(msg, **details)


def model_of(ref: Any, where: str) -> gpu_catalog.GpuModel:
    model = gpu_catalog.lookup_model(ref)
    if model is None:
        names = sorted(set(v.nvml_name for m in gpu_catalog.CATALOG.values() for v in m.variants))
        _fail("%s: unknown GPU model %r; valid models (NVML names): %s; catalog keys work too: %s"
              % (where, ref, ", ".join(names), ", ".join(gpu_catalog.model_keys())),
              valid_models=names)
    return model


def layout_key(mig_devices: Optional[Mapping[str, Any]]) -> Layout:
    """Canonical layout of one GPU from a mig-devices mapping (``{}`` MIG enabled, empty; None MIG disabled)."""
    if mig_devices is None:
        return WHOLE
    return tuple(sorted((gpu_catalog.canonical_profile_name(k), int(v)) for k, v in mig_devices.items() if int(v)))


def standard_layout(name: str, model: gpu_catalog.GpuModel) -> Optional[Layout]:
    """mig-parted's standard config names on one model: None when ``name`` is not one of them."""
    if name == "all-disabled" or not gpu_catalog.mig_capable(model):
        return WHOLE if name in ("all-disabled", "all-enabled", "all-balanced") or name.startswith("all-") else None
    if name == "all-enabled":
        return ()
    if name == "all-balanced":
        return layout_key(model.all_balanced)
    if name.startswith("all-"):
        prof = name[4:]
        for p in model.profiles:
            if p.name == gpu_catalog.canonical_profile_name(prof):
                return ((p.name, p.max_instances),)
    return None


def _current_layouts(value, models, configs, where):
    """Per GPU layout (or None) of a node's ``current``."""
    if value is None:
        return [None] * len(models), None
    if isinstance(value, str):
        name = value
        if configs and name in configs:
            gpus = [{"index": i, "mig_capable": gpu_catalog.mig_capable(m), "pci_device_id": m.variants[0].pci_device_id}
                    for i, m in enumerate(models)]
            desired = mig_config.resolve(configs[name], gpus)
            out = []
            for i, m in enumerate(models):
                d = desired.get(i)
                if not gpu_catalog.mig_capable(m):
                    out.append(WHOLE)
                elif d is None:
                    out.append(None)
                else:
                    out.append(layout_key(d.mig_devices) if d.mig_enabled else WHOLE)
            return out, name
        out = []
        for m in models:
            lay = standard_layout(name, m)
            if lay is None:
                _fail("%s: mig config %r is neither a standard name (all-disabled, all-enabled, all-balanced, "
                      "all-<profile>) nor one of current_configs (%s)"
                      % (where, name, ", ".join(sorted(configs or {})) or "none given"))
            out.append(lay)
        return out, name
    if isinstance(value, dict):
        return [_one_layout(value, m, "%s" % where) for m in models], None
    if isinstance(value, list):
        if len(value) != len(models):
            _fail("%s: a list needs one layout per GPU (%d), got %d" % (where, len(models), len(value)))
        out = []
        for i, (v, m) in enumerate(zip(value, models)):
            if isinstance(v, str):
                out.append(_current_layouts(v, [m], configs, "%s[%d]" % (where, i))[0][0])
            else:
                out.append(None if v is None else _one_layout(v, m, "%s[%d]" % (where, i)))
        return out, None
    _fail("%s must be a mig config name, a mapping profile -> count, or a list per GPU" % where)


def _one_layout(value, model, where):
    if not isinstance(value, dict):
        _fail("%s must be a mapping profile -> count" % where)
    if not gpu_catalog.mig_capable(model):
        if any(int(v) for v in value.values()):
            _fail("%s: %s does not support MIG" % (where, model.marketing_name))
        return WHOLE
    for k, v in value.items():
        prof = gpu_catalog.canonical_profile_name(k)
        if prof not in [p.name for p in model.profiles]:
            _fail("%s: profile %s does not exist on %s; valid profiles: %s"
                  % (where, k, model.marketing_name, ", ".join(p.name for p in model.profiles)))
        validation.integer(v, "%s.%s" % (where, k), 0)
    return layout_key(value)


def _check_entry(entry, where, keys, shape=""):
    """An entry of a list option is a mapping (``shape`` says of what) of ``keys`` only; the error names them."""
    if not isinstance(entry, dict):
        _fail("%s must be a mapping%s" % (where, shape))
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        _fail("%s: unknown keys %s; valid keys: %s" % (where, ", ".join(unknown), ", ".join(keys)))


def parse_nodes(nodes: Any, current_configs: Optional[Mapping[str, Any]] = None) -> List[Node]:
    if not isinstance(nodes, list) or not nodes:
        _fail("nodes must be a non-empty list of {name, gpus: [{model, count}], labels?, current?}")
    configs = None
    if current_configs:
        configs = mig_config.parse_spec(cast(Dict[str, Any], current_configs), source="current_configs")
    out = []
    seen = set()
    for i, n in enumerate(nodes):
        where = "nodes[%d]" % i
        _check_entry(n, where, NODE_KEYS, " with name and gpus")
        name = n.get("name")
        if not name or not isinstance(name, str):
            _fail("%s.name is required (the Kubernetes node name)" % where)
        if name in seen:
            _fail("%s: node %s is listed twice" % (where, name))
        seen.add(name)
        gpus = n.get("gpus")
        if not isinstance(gpus, list):
            _fail("%s.gpus must be a list of {model, count}" % where)
        models = []
        for j, g in enumerate(gpus):
            gw = "%s.gpus[%d]" % (where, j)
            if not isinstance(g, dict) or "model" not in g:
                _fail("%s must be a mapping with model and count" % gw)
            model = model_of(g["model"], gw)
            count = validation.integer(g.get("count", 1), gw + ".count", 0)
            models.extend([model] * count)
        labels = n.get("labels") or {}
        if not isinstance(labels, dict):
            _fail("%s.labels must be a mapping" % where)
        current, cname = _current_layouts(n.get("current"), models, configs, where + ".current")
        busy = validation.integer(n.get("busy") or 0, where + ".busy", 0)
        out.append(Node(name, tuple(models), dict(labels), tuple(current), cname, busy))
    return out


def parse_demand(demand: Any) -> List[Item]:
    if not isinstance(demand, list):
        _fail("demand must be a list of {tenant, name, replicas, memory_gb, kind, isolation, ...}")
    out = []
    seen = set()
    for i, d in enumerate(demand):
        where = "demand[%d]" % i
        _check_entry(d, where, DEMAND_KEYS)
        for key in ("tenant", "name", "replicas", "memory_gb", "kind", "isolation"):
            if d.get(key) is None:
                _fail("%s.%s is required" % (where, key))
        tenant = str(d["tenant"])
        if not _DNS_LABEL.match(tenant) or len(tenant) > 63:
            _fail("%s.tenant %r must be a Kubernetes namespace name (lower-case letters, digits, '-')" % (where, tenant))
        name = str(d["name"])
        where = "demand[%d] (%s/%s)" % (i, tenant, name)
        if (tenant, name) in seen:
            _fail("%s: %s/%s is listed twice" % (where, tenant, name))
        seen.add((tenant, name))
        replicas = validation.integer(d["replicas"], where + ".replicas", 0)
        memory = validation.number(d["memory_gb"], where + ".memory_gb", 0, strict_min=True)
        compute = d.get("compute")
        if compute is not None:
            compute = validation.number(compute, where + ".compute", 0, strict_min=True)
            if compute > 1:
                _fail("%s.compute is a fraction of one GPU (0 < compute <= 1), got %r; use gpus_per_replica for more"
                      % (where, d["compute"]))
        kind = d["kind"]
        if kind not in KINDS:
            _fail("%s.kind %r is not valid; valid kinds: %s" % (where, kind, ", ".join(KINDS)))
        iso = d["isolation"]
        if iso not in ISOLATIONS:
            _fail("%s.isolation %r is not valid; valid values: %s" % (where, iso, ", ".join(ISOLATIONS)))
        prio = validation.integer(d.get("priority", 0), where + ".priority")
        gpr = validation.integer(d.get("gpus_per_replica", 1), where + ".gpus_per_replica", 1)
        resource = d.get("resource")
        if resource is not None:
            resource = resources.check_gpu_resource(resource, where + ".resource")
        out.append(Item(i, tenant, name, replicas, memory, compute, kind, iso, prio, gpr, resource))
    return out


def parse_prices(prices: Optional[Mapping[str, Any]], nodes: List[Node]) -> Prices:
    """USD per GPU-hour per catalog key: the catalog's, overridden by ``prices`` (keys: model names or keys)."""
    table = gpu_catalog.default_prices()
    used = sorted(set(m.key for n in nodes for m in n.models))
    for key, value in (prices or {}).items():
        model = gpu_catalog.lookup_model(key)
        if model is None:
            _fail("prices: %r is not a GPU model; valid keys: the fleet's models %s (or any catalog key: %s)"
                  % (key, ", ".join(used), ", ".join(gpu_catalog.model_keys())), valid_models=used)
        table[model.key] = validation.number(value, "prices.%s" % key, 0)
    return table


def parse_options(p: Mapping[str, Any]) -> PlanOptions:
    """gpu_plan's objective, solver, disruption_budget, time_limit_s, bound and lp_rounding (None or missing: the
    default) -> :class:`PlanOptions` (which checks them; the errors name the valid values)."""
    return PlanOptions(**dict((f.name, p[f.name]) for f in dataclasses.fields(PlanOptions) if p.get(f.name) is not None))


def parse_request(params: Optional[Mapping[str, Any]]) -> PlanRequest:
    """gpu_plan's parameters (``PLAN_KEYS``; others are ignored, None is the default) -> :class:`PlanRequest`.

    The one place the module's dict is read: options first, then nodes (with ``current_configs``), demand, prices.
    """
    p = dict((k, v) for k, v in (params or {}).items() if k in PLAN_KEYS and v is not None)
    options = parse_options(p)
    nodes = parse_nodes(p.get("nodes"), p.get("current_configs"))
    items = parse_demand(p.get("demand"))
    prices = parse_prices(p.get("prices"), nodes)
    return PlanRequest(nodes=nodes, items=items, options=options, prices=prices)


# -- helpers that build the node list -----------------------------------------------------------------------

def _facts_layout(gpu):
    if not gpu.get("mig_capable"):
        return None
    if not gpu.get("mig_mode_current"):
        return "disabled"
    counts = {}
    seen = set()
    for inst in gpu.get("instances") or []:
        gid = inst.get("gpu_instance_id")
        key = (gid, inst.get("profile"))
        if gid is not None and key in seen:
            continue
        seen.add(key)
        prof = inst.get("profile") or ""
        if "c." in prof.split("g.")[0]:
            prof = prof.split(".", 1)[1]
        counts[prof] = counts.get(prof, 0) + 1
    return counts


def nodes_from_facts(facts_by_host: Optional[Mapping[str, Any]],
                     labels_by_host: Optional[Mapping[str, Dict[str, str]]] = None) -> List[Dict[str, Any]]:
    """``{host: gpu_info result (or its gpus list)}`` -> the planner's node list, current layouts from the facts."""
    out = []
    for host in sorted(facts_by_host or {}):
        facts = (facts_by_host or {})[host]
        gpus = facts.get("gpus") if isinstance(facts, dict) else facts
        gpus = sorted(gpus or [], key=lambda g: g.get("index", 0))
        groups: List[Dict[str, Any]] = []
        current: List[Any] = []
        for g in gpus:
            model = g.get("model") or g.get("name")
            if groups and groups[-1]["model"] == model:
                groups[-1]["count"] += 1
            else:
                groups.append({"model": model, "count": 1})
            lay = _facts_layout(g)
            current.append("all-disabled" if lay == "disabled" else lay)
        node: Dict[str, Any] = {"name": host, "gpus": groups}
        mig_gpus = [c for g, c in zip(gpus, current) if g.get("mig_capable")]
        if mig_gpus and all(c == "all-disabled" for c in mig_gpus):
            # every MIG-capable GPU runs without MIG: the node is in mig-parted's all-disabled, by name, as its
            # nvidia.com/mig.config label would say, so a plan that keeps it so does not count it as changed
            node["current"] = "all-disabled"
        elif any(c is not None for c in current):
            node["current"] = current
        labels = (labels_by_host or {}).get(host)
        if labels:
            node["labels"] = labels
        out.append(node)
    return out


def _model_of_product(product):
    """The catalog model whose NVML name GFD's nvidia.com/gpu.product label spells (spaces as dashes)."""
    for model in gpu_catalog.CATALOG.values():
        for v in model.variants:
            if gpu_catalog.product_label(v.nvml_name) == product:
                return model
    return None


def nodes_from_hostvars(hostvars_by_host: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """Host vars of the gpuops.k8s.gpu_nodes inventory plugin -> the planner's node list (current = mig.config label)."""
    out = []
    for host in sorted(hostvars_by_host or {}):
        hv = (hostvars_by_host or {})[host] or {}
        product = hv.get("gpu_product")
        count = hv.get("gpu_count") or 0
        if not product or not count:
            continue
        model = gpu_catalog.lookup_model(product) or _model_of_product(product)
        node = {"name": hv.get("gpuops_k8s_node_name") or host,
                "gpus": [{"model": model.variants[0].nvml_name if model else product, "count": int(count)}]}
        if hv.get("mig_config"):
            node["current"] = hv["mig_config"]
        out.append(node)
    return out


def tenants_from_plan(plan: Any, base: Optional[List[Dict[str, Any]]] = None) -> List[Dict[str, Any]]:
    """gpu_tenancy_tenants entries from a plan's quotas; ``base`` (existing tenant entries) keeps other fields."""
    quotas = plan.get("quotas") if isinstance(plan, dict) else None
    if isinstance(plan, dict) and "plan" in plan:
        quotas = plan["plan"].get("quotas")
    by_name = dict((t["name"], dict(t)) for t in (base or []))
    for tenant in sorted(quotas or {}):
        entry = by_name.setdefault(tenant, {"name": tenant})
        hard = dict((entry.get("quota") or {}).get("hard") or {})
        hard.update((quotas or {})[tenant]["hard"])
        entry["quota"] = {"hard": hard}
    return [by_name[k] for k in sorted(by_name)]


def nodes_diff(nodes_in: Optional[List[Dict[str, Any]]], result: Mapping[str, Any]) -> Dict[str, str]:
    """A diff (before/after text) of each node's MIG config and device-plugin config."""
    tracker = diff_helper.DiffTracker()
    for n in nodes_in or []:
        cur = n.get("current")
        labels = n.get("labels") or {}
        tracker.add(str(n.get("name")), before="mig_config=%s device_plugin_config=%s" % (
            cur if isinstance(cur, str) else ("custom" if cur else "-"),
            labels.get("nvidia.com/device-plugin.config", "-")))
    for nc in result["node_configs"]:
        tracker.add(nc["node"], after="mig_config=%s device_plugin_config=%s" % (
            nc["mig_config"] or "-", nc["device_plugin_config"] or "-"))
    return tracker.as_text("nodes (current)", "nodes (plan)")
