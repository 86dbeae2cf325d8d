# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node labels and extended resources as GPU Feature Discovery and the NVIDIA device plugin publish them.

Pure Python (no Kubernetes, no NVML), Python 3.9 compatible. Input: what a node holds (the simulated
lab's ``gpuops_sim_gpus: [{model, count}]``, optionally a MIG layout in mig-parted's shape, or the
``gpus`` facts of ``gpu_info``/``read_host``), the MIG strategy and the sharing config. Output: the
labels GFD writes and the ``nvidia.com/*`` capacity the device plugin advertises. Used by the
``gpuops.k8s.sim_gpu_node`` module and the e2e tests' kwok nodes.

Facts (shared/reference/k8s-gpu-stack.md sections 1.5, 1.6, 2.2):

* ``none``: every GPU is ``nvidia.com/gpu``; MIG devices are not exposed; no ``mig.strategy`` label.
* ``single``: MIG devices are ``nvidia.com/gpu``; every GPU must have MIG enabled with the same
  devices, otherwise GFD labels the product ``<product>-MIG-INVALID`` with count 0 (and nothing is
  advertised). ``gpu.product/count/memory`` describe the MIG device.
* ``mixed``: full GPUs stay ``nvidia.com/gpu``; each MIG profile whose compute-instance slices equal
  its GPU-instance slices is ``nvidia.com/mig-<profile>`` ('+' becomes '.'), with per-profile labels.
* Sharing (time-slicing, MPS): each device of a resource the config lists is advertised that resource's
  ``replicas`` times (a resource it does not list is not shared; the shorthand without ``resources`` shares
  every resource); ``<resource>.replicas`` is the replica count, 1 when the resource is not shared (GFD always runs with a config, so ``getReplicas`` is
  1 for an unshared resource). GFD labels MIG-enabled parent GPUs without sharing
  (``NewGPUResourceLabelerWithoutSharing``): when every GPU of the product has MIG enabled,
  ``gpu.replicas`` is 0 and ``gpu.sharing-strategy`` none (a full GPU of the same product overrides
  that). ``-SHARED`` is appended to the product unless ``rename_by_default``, which advertises
  ``<resource>.shared`` instead. MPS is refused with MIG devices and with the ``mixed`` strategy.
* ``single`` with an invalid layout: product ``<product>-MIG-INVALID``, count 0, memory 0, replicas 0
  and an empty sharing strategy (``newInvalidMigStrategyLabeler``).
* MIG devices carry GFD's attribute labels: ``.memory``, ``.multiprocessors``, ``.slices.gi``,
  ``.slices.ci`` and ``.engines.{copy,decoder,encoder,jpeg,ofa}`` (gpu_catalog.profile_engines).
* ``nvidia.com/gpu.present`` is NOT a GFD label: the GPU Operator writes it (on nodes NFD found an
  NVIDIA PCI device on). It is emitted here because the simulated lab has no GPU Operator and the
  lab's DaemonSets (dcgm-exporter, device plugin) select on it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import GPU_RESOURCE, is_plugin_resource
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

MIG_STRATEGIES = ("none", "single", "mixed")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")

# Input labels (nvidia.com/device-plugin.config, nvidia.com/mig.config, nvidia.com/mig.config.state,
# nvidia.com/gpu.deploy.*) belong to people and operators and are never touched.
_NOT_OWNED_PREFIXES = ("nvidia.com/device-plugin.config", "nvidia.com/mig.config", "nvidia.com/gpu.deploy.")

FAMILY = {
    gpu_catalog.ARCH_AMPERE: "ampere",
    gpu_catalog.ARCH_HOPPER: "hopper",
    gpu_catalog.ARCH_BLACKWELL: "blackwell",
    gpu_catalog.ARCH_ADA: "ada-lovelace",
    gpu_catalog.ARCH_TURING: "turing",
}


def owned_label(key: str) -> bool:
    """True for a label GFD writes (removed when stale), False for input labels and others."""
    if not key.startswith("nvidia.com/"):
        return False
    if any(key.startswith(p) for p in _NOT_OWNED_PREFIXES):
        return False
    rest = key[len("nvidia.com/"):]
    return rest.startswith(("gpu.", "mig.", "mig-", "cuda.", "mps.", "gfd."))


def owned_resource(name: str) -> bool:
    """True for an extended resource the NVIDIA device plugin advertises."""
    return is_plugin_resource(name)


# ----------------------------------------------------------------------------------------- inputs

def _gpus_from_fleet(fleet_gpus):
    """``[{model, count}]`` -> one dict per GPU (index order)."""
    if not isinstance(fleet_gpus, list) or not fleet_gpus:
        raise GpuOpsError("gpus must be a non-empty list of {model, count} (as gpuops_sim_gpus)")
    out = []
    for entry in fleet_gpus:
        if not isinstance(entry, dict) or "model" not in entry:
            raise GpuOpsError("each gpus entry needs a model and a count, got %r" % (entry,))
        model = gpu_catalog.find_model(entry["model"])
        try:
            count = int(entry.get("count", 1))
        except (TypeError, ValueError):
            raise GpuOpsError("gpus count must be an integer, got %r" % (entry.get("count"),))
        if count < 1:
            raise GpuOpsError("gpus count must be at least 1, got %d for %s" % (count, model.key))
        variant = gpu_catalog.variant_for(model, entry.get("name"))
        for dummy in range(count):
            out.append({"model": model, "name": variant.nvml_name, "memory_mib": model.total_memory_mib,
                        "mig_enabled": False, "mig_devices": []})
    return out


def _gpus_from_facts(facts_gpus):
    """``gpu_info`` facts (its ``gpus`` list) -> one dict per GPU; MIG devices from the live instances (a GPU
    instance without compute instance is no device, as the device plugin sees it)."""
    if not isinstance(facts_gpus, list) or not facts_gpus:
        raise GpuOpsError("gpu_facts must be the non-empty gpus list of gpuops.k8s.gpu_info")
    out = []
    for g in facts_gpus:
        model = gpu_catalog.lookup_model(g.get("model") or g.get("pci_device_id"), g.get("name"))
        if model is None:
            model = gpu_catalog.find_model(g.get("name"))
        devices = []
        if g.get("mig_mode_current"):
            for inst in g.get("instances") or []:
                if mig_instances.row_is_mig_device(inst):
                    devices.append(str(inst["profile"]))
        out.append({"model": model, "name": g.get("name") or gpu_catalog.variant_for(model).nvml_name,
                    "memory_mib": int(g.get("memory_total_mib") or model.total_memory_mib),
                    "mig_enabled": bool(g.get("mig_mode_current")), "mig_devices": devices})
    return out


def _normalize_mig_config(mig_config, gpu_count):
    """mig-parted entries or a {profile: count} shorthand -> {gpu index: (enabled, {profile: count})}."""
    if mig_config is None:
        return {}
    if isinstance(mig_config, dict):
        if "mig-devices" in mig_config or "mig-enabled" in mig_config:
            entries = [mig_config]
        else:
            entries = [{"devices": "all", "mig-enabled": bool(mig_config), "mig-devices": mig_config}]
    elif isinstance(mig_config, list):
        entries = mig_config
    else:
        raise GpuOpsError("mig_config must be a list of mig-parted entries (devices, mig-enabled, "
                          "mig-devices) or a mapping of profile to count, got %r" % (mig_config,))
    out = {}
    for e in entries:
        if not isinstance(e, dict):
            raise GpuOpsError("mig_config entries must be mappings, got %r" % (e,))
        unknown = set(e) - set(["devices", "mig-enabled", "mig-devices", "device-filter"])
        if unknown:
            raise GpuOpsError("unknown mig_config keys %s; valid: devices, mig-enabled, mig-devices, "
                              "device-filter" % ", ".join(sorted(unknown)))
        devices = e.get("devices", "all")
        if devices == "all":
            indices = list(range(gpu_count))
        elif isinstance(devices, list) and all(isinstance(i, int) for i in devices):
            indices = devices
        else:
            raise GpuOpsError("mig_config devices must be 'all' or a list of GPU indices, got %r" % (devices,))
        for i in indices:
            if i < 0 or i >= gpu_count:
                raise GpuOpsError("mig_config names GPU %d but the node has GPUs 0-%d" % (i, gpu_count - 1))
            enabled = bool(e.get("mig-enabled", bool(e.get("mig-devices"))))
            out[i] = (enabled, dict(e.get("mig-devices") or {}))
    return out


def _apply_mig_config(gpus, mig_config):
    for index, (enabled, devices) in sorted(_normalize_mig_config(mig_config, len(gpus)).items()):
        g = gpus[index]
        model = g["model"]
        if enabled and not gpu_catalog.mig_capable(model):
            raise GpuOpsError("GPU %d (%s) does not support MIG; MIG-capable models: %s"
                              % (index, model.marketing_name,
                                 ", ".join(k for k in gpu_catalog.model_keys()
                                           if gpu_catalog.mig_capable(gpu_catalog.CATALOG[k]))))
        names, comp, mem = [], 0, 0
        for name, count in sorted(devices.items()):
            ci, gi = gpu_catalog.parse_profile(name)
            prof = gpu_catalog.get_profile(model, gi)
            try:
                count = int(count)
            except (TypeError, ValueError):
                raise GpuOpsError("MIG device count for %s must be an integer, got %r" % (name, count))
            if count < 0 or count > prof.max_instances:
                raise GpuOpsError("GPU %d (%s): %d x %s requested, at most %d fit"
                                  % (index, model.marketing_name, count, gi, prof.max_instances))
            comp += prof.compute_slices * count
            mem += prof.memory_slices * count
            names.extend([gpu_catalog.canonical_profile_name(name) if ci else gi] * count)
        if comp > model.compute_slices or mem > model.memory_slices:
            raise GpuOpsError("GPU %d (%s): the MIG layout %s needs %d compute / %d memory slices, the GPU "
                              "has %d / %d" % (index, model.marketing_name, devices, comp, mem,
                                               model.compute_slices, model.memory_slices))
        g["mig_enabled"] = enabled
        g["mig_devices"] = names if enabled else []
    return gpus


def _sharing(sharing):
    """Normalize the sharing config: None -> no config; else {strategy, replicas, rename_by_default}."""
    if sharing is None:
        return None
    if not isinstance(sharing, dict):
        raise GpuOpsError("sharing must be a mapping with strategy (%s) and replicas"
                          % ", ".join(SHARING_STRATEGIES))
    strategy = sharing.get("strategy") or "none"
    if strategy not in SHARING_STRATEGIES:
        raise GpuOpsError("sharing strategy %r is not valid; valid: %s" % (strategy, ", ".join(SHARING_STRATEGIES)))
    if strategy == "none":
        return {"strategy": "none", "replicas": 1, "rename_by_default": False}
    replicas = sharing.get("replicas")
    try:
        replicas = int(replicas)
    except (TypeError, ValueError):
        raise GpuOpsError("sharing replicas must be an integer >= 2 for %s, got %r" % (strategy, replicas))
    if replicas < 2:
        raise GpuOpsError("number of replicas must be >= 2 for %s sharing, got %d" % (strategy, replicas))
    resources = sharing.get("resources")
    if resources is not None:
        # the device plugin replicates only the resources its config lists, each with its own replicas
        if not isinstance(resources, dict) or not resources:
            raise GpuOpsError("sharing resources must map each shared resource (nvidia.com/gpu, "
                              "nvidia.com/mig-<profile>) to its replicas, got %r" % (resources,))
        try:
            resources = dict((str(k), int(v)) for k, v in resources.items())
        except (TypeError, ValueError):
            raise GpuOpsError("sharing resources: replicas must be integers >= 2, got %r" % (sharing["resources"],))
        if any(v < 2 for v in resources.values()):
            raise GpuOpsError("sharing resources: replicas must be >= 2, got %r" % (resources,))
    return {"strategy": strategy, "replicas": replicas, "resources": resources,
            "rename_by_default": bool(sharing.get("rename_by_default", False))}


def _resource_share(share, resource):
    """How the device plugin and GFD share one physical resource: ``(replicas, advertised name, product suffix,
    sharing-strategy label, replicas label)``. Only a resource the config replicates is shared (every resource when
    the sharing config lists none, as the lab's ``sharing: {strategy, replicas}`` shorthand means)."""
    if not share or share["strategy"] == "none":
        return 1, resource, "", "none", "1"
    if share.get("resources") is None:
        replicas = share["replicas"]
    elif resource in share["resources"]:
        replicas = share["resources"][resource]
    else:
        return 1, resource, "", "none", "1"
    renamed = share["rename_by_default"]
    return (replicas, resource + ".shared" if renamed else resource, "" if renamed else "-SHARED",
            share["strategy"], str(replicas))


# ---------------------------------------------------------------------------------------- outputs

def _gpu_labels(product, count, memory, replicas_label, strategy_label):
    return {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.memory": str(memory), "nvidia.com/gpu.replicas": replicas_label,
            "nvidia.com/gpu.sharing-strategy": strategy_label}


def _engine_labels(resource, model, prof):
    eng = gpu_catalog.profile_engines(model, prof)
    return dict(("%s.engines.%s" % (resource, k), str(v)) for k, v in eng.items())


def node_gpu_state(gpus: Optional[List[Dict[str, Any]]] = None, mig_strategy: str = "none", mig_config: Any = None,
                   sharing: Optional[Dict[str, Any]] = None, gpu_facts: Optional[List[Dict[str, Any]]] = None,
                   driver_version: Optional[str] = None) -> Dict[str, Any]:
    """Labels and ``nvidia.com/*`` capacity of one node, as GFD and the device plugin publish them.

    ``gpus``: ``[{model, count}]`` (the simulated lab's ``gpuops_sim_gpus``); ``mig_config``: a MIG
    layout (mig-parted entries ``[{devices, mig-enabled, mig-devices}]`` or ``{profile: count}`` for
    every GPU); ``gpu_facts``: the ``gpus`` list of ``gpu_info`` instead of both (the live truth);
    ``sharing``: ``{strategy: none|time-slicing|mps, replicas, rename_by_default}`` or None.
    Returns ``{"labels": {...}, "capacity": {...}, "devices": [...]}`` (label and quantity values are
    strings). Raises GpuOpsError, before anything changes, when the input is not valid.
    """
    if mig_strategy not in MIG_STRATEGIES:
        raise GpuOpsError("mig_strategy %r is not valid; valid: %s" % (mig_strategy, ", ".join(MIG_STRATEGIES)))
    if gpu_facts is not None:
        if mig_config is not None:
            raise GpuOpsError("give either gpu_facts (the live MIG layout) or mig_config, not both")
        devs = _gpus_from_facts(gpu_facts)
    else:
        devs = _apply_mig_config(_gpus_from_fleet(gpus), mig_config)
    share = _sharing(sharing)
    any_mig = any(g["mig_enabled"] for g in devs)
    if share and share["strategy"] == "mps":
        if mig_strategy == "mixed":
            raise GpuOpsError("using --mig-strategy=mixed is not supported with MPS; use none or single")
        if any_mig and mig_strategy != "none":
            raise GpuOpsError("MPS sharing is not supported for MIG devices (disable MIG or use time-slicing)")

    first = devs[0]
    model = first["model"]
    product = gpu_catalog.product_label(first["name"])
    # full GPUs, and MIG devices with the single strategy, are nvidia.com/gpu
    replicas, gpu_name, suffix, strategy_label, replicas_label = _resource_share(share, GPU_RESOURCE)
    # every GPU of the product has MIG enabled: GFD labels the parents without sharing
    parents_only = all(g["mig_enabled"] for g in devs if g["name"] == first["name"])
    parent_suffix = "" if parents_only else suffix
    parent_replicas = "0" if parents_only else replicas_label
    parent_strategy = "none" if parents_only else strategy_label

    labels = {
        # Written by the GPU Operator, not by GFD (see the module docstring); the simulated lab has no
        # GPU Operator and its DaemonSets select on it.
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.family": FAMILY.get(model.architecture, "undefined"),
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true" if gpu_catalog.mig_capable(model) else "false",
        "nvidia.com/mps.capable": "true" if (share and share["strategy"] == "mps" and not any_mig) else "false",
    }
    if driver_version:
        parts = (str(driver_version).split(".") + ["", "", ""])[:3]
        labels.update({
            "nvidia.com/cuda.driver-version.full": str(driver_version),
            "nvidia.com/cuda.driver-version.major": parts[0],
            "nvidia.com/cuda.driver-version.minor": parts[1],
            "nvidia.com/cuda.driver-version.revision": parts[2],
        })

    capacity = {}
    devices = []

    if mig_strategy == "none" or (mig_strategy == "single" and not any_mig):
        if mig_strategy == "single":
            labels["nvidia.com/mig.strategy"] = "single"
        labels.update(_gpu_labels(product + parent_suffix, len(devs), first["memory_mib"], parent_replicas,
                                  parent_strategy))
        capacity[gpu_name] = len(devs) * replicas
        devices = [GPU_RESOURCE] * len(devs)
    elif mig_strategy == "single":
        labels["nvidia.com/mig.strategy"] = "single"
        layouts = set(tuple(sorted(g["mig_devices"])) for g in devs)
        only = sorted(layouts)[0] if len(layouts) == 1 else ()
        all_mig = all(g["mig_enabled"] for g in devs)
        one_profile = bool(only) and len(set(only)) == 1 and gpu_catalog.parse_profile(only[0])[0] is None
        one_model = len(set(g["model"].key for g in devs)) == 1
        uniform = all_mig and one_profile and one_model
        if not uniform:
            labels.update(_gpu_labels(product + "-MIG-INVALID", 0, 0, "0", ""))
            capacity[gpu_name] = 0
        else:
            prof = gpu_catalog.get_profile(model, only[0])
            count = len(only) * len(devs)
            labels.update(_gpu_labels("%s-MIG-%s%s" % (product, gpu_catalog.label_safe(prof.name), suffix),
                                      count, prof.memory_mib, replicas_label, strategy_label))
            labels["nvidia.com/gpu.slices.gi"] = str(prof.compute_slices)
            labels["nvidia.com/gpu.slices.ci"] = str(prof.compute_slices)
            labels.update(_engine_labels(GPU_RESOURCE, model, prof))
            if prof.sm:
                labels["nvidia.com/gpu.multiprocessors"] = str(prof.sm)
            capacity[gpu_name] = count * replicas
            devices = [GPU_RESOURCE] * count
    else:  # mixed
        labels["nvidia.com/mig.strategy"] = "mixed"
        full = [g for g in devs if not g["mig_enabled"]]
        labels.update(_gpu_labels(product + parent_suffix, len(devs), first["memory_mib"], parent_replicas,
                                  parent_strategy))
        capacity[gpu_name] = len(full) * replicas
        devices = [GPU_RESOURCE] * len(full)
        per_profile = {}
        for g in devs:
            for name in g["mig_devices"]:
                if not gpu_catalog.is_advertised_mig_device(name):
                    continue
                prof = gpu_catalog.get_profile(g["model"], gpu_catalog.parse_profile(name)[1])
                entry = per_profile.setdefault(prof.name, [g, prof, 0])
                entry[2] += 1
        for pname in sorted(per_profile):
            g, prof, count = per_profile[pname]
            res = gpu_catalog.resource_name(pname, "mixed")
            res_replicas, res_name, res_suffix, res_strategy, res_replicas_label = _resource_share(share, res)
            capacity[res_name] = count * res_replicas
            devices.extend([res] * count)
            labels.update({
                res + ".count": str(count),
                res + ".memory": str(prof.memory_mib),
                res + ".product": "%s-MIG-%s%s" % (gpu_catalog.product_label(g["name"]),
                                                   gpu_catalog.label_safe(pname), res_suffix),
                res + ".replicas": res_replicas_label,
                res + ".sharing-strategy": res_strategy,
                res + ".slices.gi": str(prof.compute_slices),
                res + ".slices.ci": str(prof.compute_slices),
            })
            labels.update(_engine_labels(res, g["model"], prof))
            if prof.sm:
                labels[res + ".multiprocessors"] = str(prof.sm)

    return {"labels": labels, "capacity": dict((k, str(v)) for k, v in capacity.items()), "devices": devices}


def node_changes(current_labels: Optional[Dict[str, Any]], current_capacity: Optional[Dict[str, Any]],
                 desired: Dict[str, Any]) -> Dict[str, Any]:
    """What must change on a node to publish ``desired`` (from node_gpu_state).

    Returns ``{"labels": {key: value or None}, "capacity": {name: value or None}}`` holding only the
    differences; None removes a stale label or resource of GFD / the device plugin. Other labels and
    resources (cpu, memory, nvidia.com/mig.config, ...) are left alone.
    """
    current_labels = current_labels or {}
    current_capacity = current_capacity or {}
    labels = {}
    for k, v in desired["labels"].items():
        if current_labels.get(k) != v:
            labels[k] = v
    for k in current_labels:
        if owned_label(k) and k not in desired["labels"]:
            labels[k] = None
    capacity = {}
    for k, v in desired["capacity"].items():
        if current_capacity.get(k) is None or str(current_capacity.get(k)) != v:
            capacity[k] = v
    for k in current_capacity:
        if owned_resource(k) and k not in desired["capacity"]:
            capacity[k] = None
    return {"labels": labels, "capacity": capacity}
