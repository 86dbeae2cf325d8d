# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a plan hands to the roles: mig-parted config, per-node configs, device-plugin configs, quotas.

* ``mig_parted_config`` - one mig-parted ``version: v1`` document; one named config per distinct node layout
  (standard names where the layout is one: ``all-disabled``, ``all-<profile>``, ``all-balanced``; else
  ``plan-<model>-<counts>`` or ``plan-<hash>`` when that is longer than a label value may be); only MIG-capable
  GPUs are listed, so mig_partition and mig-parted load it as is;
* ``node_configs`` - per node: ``mig_config``, ``device_plugin_config``, the labels to set
  (``nvidia.com/mig.config``, ``nvidia.com/device-plugin.config``), the sharing class and GPUs used;
* ``device_plugin_configs`` - named device-plugin configs: ``plan-mig-mixed`` (migStrategy mixed),
  ``plan-exclusive`` (none), ``plan-ts-<n>`` (time-slicing), ``plan-mps-<n>`` (MPS); shared GPUs are advertised as
  ``nvidia.com/gpu.shared`` (renameByDefault) so that quotas tell them from whole GPUs;
* ``quotas`` - ``{tenant: {hard: {requests.<resource>: n}}}``: what the plan gives each tenant, ``requests.`` keys
  only (the only quota keys Kubernetes enforces for extended resources).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import options as opt
from ansible_collections.gpuops.k8s.plugins.module_utils.plan import packing, workloads
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.demand import WHOLE, standard_layout
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.api import Item, Layout
from ansible_collections.gpuops.k8s.plugins.module_utils.plan.fleet import Fleet, Use

LABEL_MIG_CONFIG = "nvidia.com/mig.config"
LABEL_DP_CONFIG = "nvidia.com/device-plugin.config"


def node_layouts(fleet: Fleet, ni: int) -> List[Optional[Layout]]:
    """Per GPU index the layout the plan wants (None: left as it is)."""
    node = fleet.nodes[ni]
    out: List[Optional[Layout]] = []
    for gi, model in enumerate(node.models):
        use = fleet.assign.get((ni, gi))
        if not gpu_catalog.mig_capable(model):
            out.append(None)
        elif fleet.cls[ni] not in (None, "mig"):
            out.append(WHOLE)
        elif use is not None:
            out.append(use["layout"])
        else:
            out.append(node.current[gi])
    return out


def _entries(node, layouts):
    groups = []
    for gi, lay in enumerate(layouts):
        if lay is None:
            continue
        for g in groups:
            if g[0] == lay:
                g[1].append(gi)
                break
        else:
            groups.append((lay, [gi]))
    mig_gpus = [gi for gi, m in enumerate(node.models) if gpu_catalog.mig_capable(m)]
    entries = []
    for lay, gpus in groups:
        devices = "all" if len(groups) == 1 and gpus == mig_gpus else gpus
        if lay == WHOLE:
            entries.append({"devices": devices, "mig-enabled": False})
        else:
            entries.append({"devices": devices, "mig-enabled": True, "mig-devices": dict(lay)})
    return entries


def _config_name(node, layouts, entries):
    lays = set(lay for lay in layouts if lay is not None)
    models = set(m.key for gi, m in enumerate(node.models) if layouts[gi] is not None)
    if len(entries) == 1 and entries[0]["devices"] == "all" and len(lays) == 1:
        lay = list(lays)[0]
        if lay == WHOLE:
            return "all-disabled"
        if len(models) == 1:
            model = gpu_catalog.CATALOG[list(models)[0]]
            for std in ["all-balanced"] + ["all-%s" % p.name for p in model.profiles]:
                if standard_layout(std, model) == lay:
                    return std
            name = "plan-%s-%s" % (model.key.replace("_", "-"),
                                   "-".join("%dx%s" % (c, p) for p, c in sorted(lay, key=lambda x: (-x[1], x[0]))))
            if len(name) <= 63:
                return name
    digest = hashlib.sha1(json.dumps(entries, sort_keys=True).encode("utf-8")).hexdigest()[:10]
    return "plan-%s" % digest


def mig_outputs(fleet: Fleet) -> Tuple[Dict[str, Any], Dict[int, Optional[str]]]:
    """``(mig_parted_config, {node index: config name or None})``."""
    configs = {}
    chosen: Dict[int, Optional[str]] = {}
    for ni, node in enumerate(fleet.nodes):
        if not any(gpu_catalog.mig_capable(m) for m in node.models):
            chosen[ni] = None
            continue
        layouts = node_layouts(fleet, ni)
        if all(lay is None for lay in layouts):
            chosen[ni] = node.current_name
            continue
        entries = _entries(node, layouts)
        name = _config_name(node, layouts, entries)
        configs[name] = entries
        chosen[ni] = name
    return {"version": "v1", "mig-configs": dict((k, configs[k]) for k in sorted(configs))}, chosen


def device_plugin_name(fleet: Fleet, ni: int) -> Optional[str]:
    cls = fleet.cls[ni]
    if cls is None:
        return None
    if cls == "ts":
        return "plan-ts-%d" % max(2, ts_replicas(fleet, ni))
    if cls.startswith("mps:"):
        return "plan-mps-%s" % cls.split(":")[1]
    node = fleet.nodes[ni]
    layouts = node_layouts(fleet, ni)
    if any(lay not in (None, WHOLE) for lay in layouts) or any(
            gpu_catalog.mig_capable(m) and (node.current[gi] not in (None, WHOLE)) for gi, m in enumerate(node.models)):
        return "plan-mig-mixed"
    return "plan-exclusive"


def ts_replicas(fleet: Fleet, ni: int) -> int:
    best = 0
    for gi in range(len(fleet.nodes[ni].models)):
        use = fleet.assign.get((ni, gi))
        if use is not None:
            best = max(best, sum(u[2] for u in use["units"]))
    return best


def device_plugin_config(name: str) -> Dict[str, Any]:
    if name == "plan-mig-mixed":
        return {"version": "v1", "flags": {"migStrategy": "mixed"}}
    if name == "plan-exclusive":
        return {"version": "v1", "flags": {"migStrategy": "none"}}
    kind, replicas = name.rsplit("-", 1)
    sharing = {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": int(replicas)}]}
    if kind == "plan-ts":
        sharing["failRequestsGreaterThanOne"] = True
        return {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"timeSlicing": sharing}}
    return {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": {"mps": sharing}}


def node_outputs(fleet: Fleet, mig_names: Mapping[int, Optional[str]]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    node_configs = []
    dp_configs = {}
    for ni, node in enumerate(fleet.nodes):
        dp = device_plugin_name(fleet, ni)
        mig = mig_names.get(ni)
        labels = {}
        if mig:
            labels[LABEL_MIG_CONFIG] = mig
        if dp:
            labels[LABEL_DP_CONFIG] = dp
            dp_configs[dp] = device_plugin_config(dp)
        used = sum(1 for gi in range(len(node.models)) if fleet.assign.get((ni, gi)) is not None)
        cls = fleet.cls[ni]
        sharing = {None: "none", "mig": "mig" if dp == "plan-mig-mixed" else "exclusive", "ts": "time-slicing"}.get(
            cls, "mps")
        node_configs.append({"node": node.name, "mig_config": mig, "device_plugin_config": dp, "labels": labels,
                             "sharing": sharing, "gpus": len(node.models), "gpus_used": used,
                             "mig_config_changed": bool(mig) and mig != node.current_name})
    return node_configs, dict((k, dp_configs[k]) for k in sorted(dp_configs))


def resource_for_use(fleet: Fleet, use: Use, profile: Optional[str]) -> str:
    if profile:
        return gpu_catalog.resource_name(profile)
    if use["cls"] == "mig":
        return "nvidia.com/gpu"
    return "nvidia.com/gpu.shared"


def quotas(fleet: Fleet, items: List[Item]) -> Dict[str, Any]:
    """``{tenant: {hard: {requests.<resource>: n}}}`` from what the plan placed."""
    by_index = dict((it.index, it) for it in items)
    out: Dict[str, Dict[str, Dict[str, int]]] = {}
    for use in fleet.assign.values():
        for i, profile, n in use["units"]:
            it = by_index[i]
            res = resource_for_use(fleet, use, profile)
            count = n * (it.gpus_per_replica if use.get("group") is not None else 1)
            if use.get("group") is not None and n == 0:
                continue
            hard = out.setdefault(it.tenant, {"hard": {}})["hard"]
            key = "requests." + res
            hard[key] = hard.get(key, 0) + count
    return dict((t, {"hard": dict((k, out[t]["hard"][k]) for k in sorted(out[t]["hard"]))}) for t in sorted(out))


def placements(fleet: Fleet, items: List[Item]) -> List[Dict[str, Any]]:
    by_index = dict((it.index, it) for it in items)
    out = []
    for (ni, gi) in sorted(fleet.assign):
        use = fleet.assign[(ni, gi)]
        node = fleet.nodes[ni]
        model = node.models[gi]
        starts: Dict[str, List[int]] = {}
        if use["layout"]:
            for prof, start, size in packing.placements(model, use["layout"]):
                starts.setdefault(prof, []).append(start)
        for i, profile, n in use["units"]:
            it = by_index[i]
            row = {"tenant": it.tenant, "name": it.name, "node": node.name, "gpu": gi, "model": model.key,
                   "replicas": n, "pod_labels": workloads.pod_labels(it.tenant, it.name)}
            if use.get("group") is not None:
                row.update(slice="whole", part_of_multi_gpu_replica=True)
            elif profile:
                taken = starts.get(profile, [])[:n]
                starts[profile] = starts.get(profile, [])[n:]
                row.update(slice=profile, starts=taken)
            else:
                row.update(slice="whole" if use["cls"] == "mig" else "shared")
            out.append(row)
    return out


def gpu_allocation(fleet: Fleet, ni: int, gi: int, by_index: Mapping[int, Item]) -> float:
    """Fraction of one planned GPU that is handed out (MIG compute slices, shared memory, MPS clients, whole)."""
    use = fleet.assign.get((ni, gi))
    if use is None:
        return 0.0
    model = fleet.nodes[ni].models[gi]
    if use["layout"]:
        pmap = dict((p.name, p) for p in model.profiles)
        return sum(pmap[p].compute_slices * n for i, p, n in use["units"]) / float(model.compute_slices)
    if use["cls"] == "ts":
        mem = sum(by_index[i].memory_gb * n for i, p, n in use["units"])
        return min(1.0, mem / float(opt.capacity_gb(model)))
    if use["cls"].startswith("mps:"):
        return sum(u[2] for u in use["units"]) / float(use["cls"].split(":")[1])
    return 1.0


def mode_of_use(use: Use, profile: Optional[str]) -> str:
    if profile:
        return opt.MIG
    if use["cls"] == "ts":
        return opt.TIME_SLICING
    if use["cls"].startswith("mps:"):
        return opt.MPS
    return opt.EXCLUSIVE
