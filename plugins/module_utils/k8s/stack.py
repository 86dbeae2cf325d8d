# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Validation and planning for the Kubernetes GPU stack roles (device plugin, DCGM exporter,
tenancy, autoscaling).

Pure Python, no Kubernetes client, Python 3.9 compatible. Every function raises
``GpuOpsError`` with a message that names the valid values, so a role fails before any object
changes. Functions that accept input the cluster would silently ignore (for example a
``limits.nvidia.com/gpu`` quota key) return the corrected form plus a warning.

Facts follow shared/reference/k8s-gpu-stack.md (device plugin v0.20.0, Kubernetes quota,
priority and HPA validation rules).
"""

from __future__ import annotations

import copy
import difflib
import re

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import catalog as gpu_catalog

# --------------------------------------------------------------------------------------------
# Device plugin (NVIDIA/k8s-device-plugin v0.20.0, api/config/v1)

DEVICE_PLUGIN_VERSION = "v0.20.0"
MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
ALLOCATION_POLICIES = ("distributed", "packed")
DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")
SHARING_KINDS = ("timeSlicing", "mps")
CONFIG_LABEL = "nvidia.com/device-plugin.config"

_FLAGS_KEYS = ("migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot",
               "gdrcopyEnabled", "gdsEnabled", "mofedEnabled", "useNodeFeatureAPI",
               "deviceDiscoveryStrategy", "plugin", "gfd")
_PLUGIN_FLAGS_KEYS = ("passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
                      "nvidiaCTKPath", "containerDriverRoot", "sharedDevicesAllocationPolicy")
_GFD_FLAGS_KEYS = ("oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile")
_CONFIG_KEYS = ("version", "flags", "sharing", "resources", "imex")
_REPLICATED_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
_REPLICATED_RESOURCE_KEYS = ("name", "replicas", "devices", "rename")

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"

# Kubernetes limits
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CONFIGMAP_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_USER_PRIORITY = 1000000000
MIN_PRIORITY = -2147483648
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
HPA_MAX_STABILIZATION_WINDOW = 3600
HPA_MAX_PERIOD = 1800
HPA_POLICY_TYPES = ("Pods", "Percent")
HPA_SELECT_POLICIES = ("Max", "Min", "Disabled")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
CAPACITY_POLICIES = ("fail", "warn", "ignore")
PRIORITY_CHANGE_POLICIES = ("fail", "replace")


def _fmt(values):
    return ", ".join(str(v) for v in values)


def _closest(value, valid):
    near = difflib.get_close_matches(str(value), [str(v) for v in valid], n=3, cutoff=0.6)
    return (" (did you mean %s?)" % " or ".join(near)) if near else ""


def _check_keys(obj, valid, where):
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise GpuOpsError("%s must be a mapping, got %s" % (where, type(obj).__name__))
    unknown = sorted(k for k in obj if k not in valid)
    if unknown:
        raise GpuOpsError(
            "%s: unknown key(s) %s%s; valid keys: %s" % (where, _fmt(unknown), _closest(unknown[0], valid), _fmt(valid)),
            valid_keys=list(valid),
        )
    return obj


def _choice(value, valid, where):
    if value not in valid:
        raise GpuOpsError("%s: %r is not valid%s; valid values: %s" % (where, value, _closest(value, valid), _fmt(valid)),
                          valid_values=list(valid))
    return value


def _int(value, where, minimum=None, maximum=None):
    if isinstance(value, bool):
        raise GpuOpsError("%s must be an integer, got %r" % (where, value))
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise GpuOpsError("%s must be an integer, got %r" % (where, value))
    if minimum is not None and number < minimum:
        raise GpuOpsError("%s must be >= %d, got %d" % (where, minimum, number))
    if maximum is not None and number > maximum:
        raise GpuOpsError("%s must be <= %d, got %d" % (where, maximum, number))
    return number


def mig_profiles():
    """Every MIG GPU-instance profile of the catalog, label-safe (``1g.10gb``, ``1g.10gb.me``)."""
    names = set()
    for model in gpu_catalog.CATALOG.values():
        for profile in model.profiles:
            names.add(gpu_catalog.label_safe(profile.name))
    return sorted(names, key=_profile_sort_key)


def _profile_sort_key(name):
    m = re.match(r"^(\d+)g\.(\d+)gb(.*)$", name)
    return (int(m.group(1)), int(m.group(2)), m.group(3)) if m else (99, 0, name)


def mig_resources():
    """``nvidia.com/mig-<profile>`` for every catalog profile (the mixed-strategy resource names)."""
    return ["nvidia.com/mig-%s" % p for p in mig_profiles()]


def gpu_resources():
    """All GPU extended-resource names the stack knows: full GPUs, shared GPUs and MIG slices."""
    base = [GPU_RESOURCE] + mig_resources()
    return base + [r + SHARED_SUFFIX for r in base]


def check_gpu_resource(name, where="resource"):
    """Validate an ``nvidia.com/...`` resource name against the catalog; returns it unchanged."""
    text = str(name)
    base = text[:-len(SHARED_SUFFIX)] if text.endswith(SHARED_SUFFIX) else text
    if base == GPU_RESOURCE or base in mig_resources():
        return text
    if base.startswith("nvidia.com/mig-"):
        profile = base[len("nvidia.com/mig-"):]
        hint = ""
        if "+" in profile:
            hint = " (resource names use '.' where the profile has '+': nvidia.com/mig-%s)" % profile.replace("+", ".")
        raise GpuOpsError(
            "%s: unknown MIG resource %r%s%s; valid MIG resources (from the GPU catalog): %s"
            % (where, text, hint, _closest(base, mig_resources()), _fmt(mig_resources())),
            valid_resources=mig_resources(),
        )
    raise GpuOpsError(
        "%s: unknown GPU resource %r%s; valid: nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>[.shared] "
        "with <profile> one of %s" % (where, text, _closest(text, gpu_resources()), _fmt(mig_profiles())),
        valid_resources=gpu_resources(),
    )


def is_gpu_resource_key(key):
    return "nvidia.com/" in str(key)


def _device_list_strategy(value, where):
    """deviceListStrategy as the plugin reads it: one string is ONE strategy (v0.20.0 api/config/v1
    deviceListStrategyFlag), so "envvar,cdi-cri" would fail at start with "invalid strategy"; a comma
    string is written as a YAML list."""
    if isinstance(value, str):
        items = [item.strip() for item in value.split(",")]
    elif isinstance(value, list):
        items = value
    else:
        items = None
    if not items or not all(isinstance(item, str) and item for item in items):
        raise GpuOpsError("%s must be one of %s or a list of them, got %r" % (where, _fmt(DEVICE_LIST_STRATEGIES), value))
    for item in items:
        _choice(item, DEVICE_LIST_STRATEGIES, where)
    if len(set(items)) != len(items):
        raise GpuOpsError("%s lists a strategy twice: %r" % (where, value))
    if isinstance(value, str) and len(items) == 1:
        return items[0]
    return items


def validate_device_plugin_config(name, config):
    """Validate one named device-plugin config (the upstream ``version: v1`` file shape).

    Returns ``(normalized_config, warnings, summary)`` where summary has ``mig_strategy``,
    ``sharing`` (none|time-slicing|mps) and ``replicas``.
    """
    where = "device plugin config %r" % name
    if not isinstance(name, str) or not name or len(name) > 63 or not LABEL_VALUE_RE.match(name) \
            or not CONFIGMAP_KEY_RE.match(name):
        raise GpuOpsError(
            "%s: the name must be a valid label value and ConfigMap key (at most 63 characters of "
            "[A-Za-z0-9._-], starting and ending alphanumeric) because nodes select it with the label %s"
            % (where, CONFIG_LABEL)
        )
    warnings = []
    cfg = copy.deepcopy(config) if config is not None else {}
    _check_keys(cfg, _CONFIG_KEYS, where)
    version = cfg.get("version") or "v1"
    if version != "v1":
        raise GpuOpsError("%s: version %r is unknown; the only valid version is v1" % (where, version))
    cfg["version"] = "v1"
    flags = _check_keys(cfg.get("flags") or {}, _FLAGS_KEYS, where + " flags")
    strategy = _choice(flags.get("migStrategy", "none"), MIG_STRATEGIES, where + " flags.migStrategy")
    flags["migStrategy"] = strategy
    if "deviceDiscoveryStrategy" in flags:
        _choice(flags["deviceDiscoveryStrategy"], DISCOVERY_STRATEGIES, where + " flags.deviceDiscoveryStrategy")
    plugin = _check_keys(flags.get("plugin") or {}, _PLUGIN_FLAGS_KEYS, where + " flags.plugin")
    if "deviceListStrategy" in plugin:
        plugin["deviceListStrategy"] = _device_list_strategy(plugin["deviceListStrategy"],
                                                             where + " flags.plugin.deviceListStrategy")
    if "deviceIDStrategy" in plugin:
        _choice(plugin["deviceIDStrategy"], DEVICE_ID_STRATEGIES, where + " flags.plugin.deviceIDStrategy")
    if "sharedDevicesAllocationPolicy" in plugin:
        _choice(plugin["sharedDevicesAllocationPolicy"], ALLOCATION_POLICIES,
                where + " flags.plugin.sharedDevicesAllocationPolicy")
    if plugin.get("passDeviceSpecs"):
        warnings.append("%s: passDeviceSpecs only exists for CPUManager compatibility and needs a privileged "
                        "device plugin (set device_plugin_privileged: true)" % where)
    if plugin:
        flags["plugin"] = plugin
    if "gfd" in flags:
        _check_keys(flags["gfd"] or {}, _GFD_FLAGS_KEYS, where + " flags.gfd")
    cfg["flags"] = flags
    if cfg.get("resources"):
        warnings.append("%s: the top-level 'resources' field is ignored by the device plugin %s (resource "
                        "renaming is not supported); it was dropped" % (where, DEVICE_PLUGIN_VERSION))
    cfg.pop("resources", None)
    if "imex" in cfg:
        imex = _check_keys(cfg["imex"] or {}, ("channelIDs", "required"), where + " imex")
        ids = imex.get("channelIDs", [])
        if ids not in ([], [0]):
            raise GpuOpsError("%s imex.channelIDs: %r is not valid; valid values: [] or [0]" % (where, ids))

    sharing = _check_keys(cfg.get("sharing") or {}, SHARING_KINDS, where + " sharing")
    active = []
    replicas_seen = []
    for kind in SHARING_KINDS:
        if kind not in sharing:
            continue
        rep = _check_keys(sharing[kind] or {}, _REPLICATED_KEYS, "%s sharing.%s" % (where, kind))
        resources = rep.get("resources") or []
        if not resources:
            raise GpuOpsError("%s sharing.%s: no resources specified; list at least one "
                              "{name: nvidia.com/gpu, replicas: N>=2}" % (where, kind))
        names = set()
        for i, res in enumerate(resources):
            rwhere = "%s sharing.%s.resources[%d]" % (where, kind, i)
            _check_keys(res, _REPLICATED_RESOURCE_KEYS, rwhere)
            if not res.get("name"):
                raise GpuOpsError("%s: 'name' is required (nvidia.com/gpu or a mixed-strategy nvidia.com/mig-<profile>)"
                                  % rwhere)
            rname = str(res["name"])
            if rname.endswith(SHARED_SUFFIX):
                raise GpuOpsError("%s: name %r must be the physical resource (without %s); set renameByDefault: true "
                                  "to advertise <name>%s" % (rwhere, rname, SHARED_SUFFIX, SHARED_SUFFIX))
            check_gpu_resource(rname, rwhere)
            if rname in names:
                raise GpuOpsError("%s: resource %s is listed twice" % (rwhere, rname))
            names.add(rname)
            if "replicas" not in res:
                raise GpuOpsError("%s: 'replicas' is required (an integer >= 2)" % rwhere)
            res["replicas"] = _int(res["replicas"], rwhere + " replicas", minimum=2)
            replicas_seen.append(res["replicas"])
            for ignored in ("devices", "rename"):
                if ignored in res:
                    warnings.append("%s: '%s' is ignored by the device plugin %s (the same replicas apply to every "
                                    "GPU of the node); it was dropped" % (rwhere, ignored, DEVICE_PLUGIN_VERSION))
                    res.pop(ignored)
            if rname.startswith("nvidia.com/mig-"):
                if kind == "mps":
                    raise GpuOpsError("%s: MPS supports only full GPUs (nvidia.com/gpu); MPS is not supported on "
                                      "MIG devices" % rwhere)
                if strategy != "mixed":
                    raise GpuOpsError("%s: %s exists only with migStrategy: mixed (this config has %s); time-slicing "
                                      "supports nvidia.com/gpu and the mixed-strategy MIG resources"
                                      % (rwhere, rname, strategy))
        if "renameByDefault" in rep and not isinstance(rep["renameByDefault"], bool):
            raise GpuOpsError("%s sharing.%s.renameByDefault must be true or false" % (where, kind))
        frgto = rep.get("failRequestsGreaterThanOne")
        if frgto is not None and not isinstance(frgto, bool):
            raise GpuOpsError("%s sharing.%s.failRequestsGreaterThanOne must be true or false" % (where, kind))
        # sharing.mps.failRequestsGreaterThanOne: false is honoured from device plugin v0.20.0 (the pinned
        # version): it defaults to true only when the field is absent
        active.append(kind)
    if len(active) > 1:
        raise GpuOpsError("%s: time-slicing and MPS are mutually exclusive; configure only one of "
                          "sharing.timeSlicing or sharing.mps" % where)
    sharing_kind = "none"
    if active == ["mps"]:
        sharing_kind = "mps"
        if strategy == "mixed":
            raise GpuOpsError("%s: migStrategy mixed is not supported with MPS (the device plugin refuses it); "
                              "use migStrategy none" % where)
        if strategy == "single":
            raise GpuOpsError("%s: MPS is not supported on MIG-enabled devices; use migStrategy none with MPS" % where)
    elif active == ["timeSlicing"]:
        sharing_kind = "time-slicing"
    if sharing:
        cfg["sharing"] = sharing
    else:
        cfg.pop("sharing", None)
    summary = {"mig_strategy": strategy, "sharing": sharing_kind, "replicas": max(replicas_seen) if replicas_seen else 1}
    return cfg, warnings, summary


def device_plugin_config_effect(name, config):
    """What a device plugin config (the upstream ``version: v1`` file) makes the plugin advertise:
    ``{"mig_strategy", "sharing"}`` with sharing None or ``{strategy, replicas, resources, rename_by_default}``,
    the arguments of ``labels.node_gpu_state``. Raises GpuOpsError when the config is not valid."""
    cfg, dummy, summary = validate_device_plugin_config(name, config)
    sharing = None
    if summary["sharing"] != "none":
        kind = "mps" if summary["sharing"] == "mps" else "timeSlicing"
        # only the resources the config lists are replicated, each with its own replicas
        sharing = {"strategy": summary["sharing"], "replicas": summary["replicas"],
                   "resources": dict((r["name"], r["replicas"]) for r in cfg["sharing"][kind]["resources"]),
                   "rename_by_default": bool(cfg["sharing"][kind].get("renameByDefault", False))}
    return {"mig_strategy": summary["mig_strategy"], "sharing": sharing}


def node_device_plugin_config(labels, plugin):
    """The name of the deployed device plugin's config a node runs, as its config-manager picks it: the node's
    ``nvidia.com/device-plugin.config`` label when it names a config, else the default (the DaemonSet's
    ``DEFAULT_CONFIG``). ``plugin``: ``{"default": name, "configs": {name: config}}`` or None (no plugin
    deployed). Returns None when there is no plugin or no such config."""
    if not plugin:
        return None
    configs = plugin.get("configs") or {}
    label = (labels or {}).get(CONFIG_LABEL)
    name = label if label in configs else plugin.get("default")
    return name if name in configs else None


def node_device_plugin_effect(labels, plugin):
    """``device_plugin_config_effect`` of the config a node runs (``node_device_plugin_config``), or None."""
    name = node_device_plugin_config(labels, plugin)
    if name is None:
        return None
    return device_plugin_config_effect(name, plugin["configs"][name])


def validate_device_plugin(configs, default_config, node_configs=None, gfd_enabled=True, mps_root="/run/nvidia/mps"):
    """Validate the whole set of named configs, the default and the per-node label values.

    ``configs`` maps name -> config; ``node_configs`` maps node name -> config name (the value of
    the ``nvidia.com/device-plugin.config`` label the role sets). Returns a dict with the normalized
    ``configs``, ``summary`` per config, ``warnings``, ``uses_mps``, ``uses_mig`` and ``node_configs``.
    """
    if not isinstance(configs, dict) or not configs:
        raise GpuOpsError("device plugin configs: at least one named config is required (a mapping of "
                          "name -> config), for example {default: {version: v1, flags: {migStrategy: none}}}")
    out = {}
    summary = {}
    warnings = []
    for name in sorted(configs):
        cfg, warns, summ = validate_device_plugin_config(name, configs[name])
        out[name] = cfg
        summary[name] = summ
        warnings.extend(warns)
    if default_config not in out:
        raise GpuOpsError("device plugin default config %r is not one of the named configs; valid names: %s"
                          % (default_config, _fmt(sorted(out))), valid_configs=sorted(out))
    node_configs = node_configs or {}
    for node, cname in sorted(node_configs.items()):
        if cname not in out:
            raise GpuOpsError(
                "node %s: device plugin config %r does not exist (the config-manager would exit and the device "
                "plugin would not start on that node); valid names: %s" % (node, cname, _fmt(sorted(out))),
                valid_configs=sorted(out))
    uses_mps = any(s["sharing"] == "mps" for s in summary.values())
    if uses_mps:
        if not gfd_enabled:
            raise GpuOpsError("MPS sharing needs GPU Feature Discovery (the MPS control daemon runs only on nodes "
                              "GFD labels nvidia.com/mps.capable=true); enable GFD or remove the MPS configs")
        if not mps_root or not str(mps_root).startswith("/"):
            raise GpuOpsError("MPS sharing needs an absolute MPS root directory (mpsRoot), got %r" % (mps_root,))
        for name, s in summary.items():
            if s["sharing"] == "mps":
                out[name]["flags"].setdefault("mpsRoot", mps_root)
    return {
        "configs": out,
        "summary": summary,
        "warnings": warnings,
        "uses_mps": uses_mps,
        "uses_mig": any(s["mig_strategy"] != "none" for s in summary.values()),
        "node_configs": dict(node_configs),
        "default_config": default_config,
    }


# --------------------------------------------------------------------------------------------
# Quotas

def _quantity_int(value, where):
    """GPU quantities are whole numbers (extended resources cannot be fractional)."""
    text = str(value).strip()
    if text.endswith("k") and text[:-1].isdigit():
        return int(text[:-1]) * 1000
    if not re.match(r"^\d+$", text):
        raise GpuOpsError("%s: %r is not a whole number; GPU and MIG quantities are integers" % (where, value))
    return int(text)


def normalize_quota_hard(hard, where="quota"):
    """Normalize ``spec.hard`` of a ResourceQuota.

    GPU keys (anything with ``nvidia.com/``) must be ``requests.<resource>``: Kubernetes only
    enforces that form for extended resources. ``limits.<resource>`` and the bare ``<resource>``
    are accepted by the API but never enforced, so they are converted with a warning. MIG
    resource names are checked against the GPU catalog. Other keys are left as they are.
    Returns ``(hard, warnings)``.
    """
    if hard is None:
        return {}, []
    if not isinstance(hard, dict):
        raise GpuOpsError("%s: 'hard' must be a mapping of resource -> quantity" % where)
    out = {}
    origin = {}
    warnings = []
    for key in sorted(hard, key=str):
        value = hard[key]
        skey = str(key)
        if not is_gpu_resource_key(skey):
            out[skey] = value if isinstance(value, str) else str(value)
            continue
        if skey.startswith("requests."):
            resource = skey[len("requests."):]
        elif skey.startswith("limits."):
            resource = skey[len("limits."):]
            warnings.append("%s: %s is never enforced by Kubernetes for extended resources (only requests.* "
                            "counts); converted to requests.%s" % (where, skey, resource))
        else:
            resource = skey
            warnings.append("%s: a bare %s quota key is never enforced (only requests.* counts); converted to "
                            "requests.%s" % (where, skey, resource))
        check_gpu_resource(resource, where)
        qty = _quantity_int(value, "%s %s" % (where, skey))
        new_key = "requests." + resource
        if new_key in out and out[new_key] != str(qty):
            raise GpuOpsError("%s: %s and %s give different values (%s and %s) for the same resource; keep only "
                              "requests.%s" % (where, origin[new_key], skey, out[new_key], qty, resource))
        out[new_key] = str(qty)
        origin[new_key] = skey
    return out, warnings


def gpu_quota_totals(hard):
    """``{resource: int}`` for the GPU keys of a normalized ``hard``."""
    totals = {}
    for key, value in (hard or {}).items():
        if key.startswith("requests.") and is_gpu_resource_key(key):
            totals[key[len("requests."):]] = int(value)
    return totals


def _validate_limit_range(tenant, limits, gpu_only):
    """LimitRanges only where safe (see reference 4.4)."""
    where = "tenant %s limit_range" % tenant
    if not isinstance(limits, list):
        raise GpuOpsError("%s must be a list of LimitRange items" % where)
    for i, item in enumerate(limits):
        iwhere = "%s[%d]" % (where, i)
        _check_keys(item, ("type", "max", "min", "default", "defaultRequest", "maxLimitRequestRatio"), iwhere)
        ltype = _choice(item.get("type", "Container"), ("Container", "Pod", "PersistentVolumeClaim"), iwhere + " type")
        for field in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            for res in (item.get(field) or {}):
                if not is_gpu_resource_key(res):
                    continue
                check_gpu_resource(res, iwhere)
                if not gpu_only:
                    raise GpuOpsError(
                        "%s: GPU entries in a LimitRange are unsafe in a namespace that also runs non-GPU pods (a "
                        "Container max/min becomes a default that injects %s into every container; a Pod max rejects "
                        "pods without a GPU limit). Cap GPUs with the quota, or set gpu_only: true for a GPU-only "
                        "namespace" % (iwhere, res))
                if ltype == "Pod" and field in ("default", "defaultRequest"):
                    raise GpuOpsError("%s: a Pod LimitRange may not set %s" % (iwhere, field))
                if field == "maxLimitRequestRatio":
                    raise GpuOpsError("%s: maxLimitRequestRatio makes no sense for %s (GPU requests must equal "
                                      "limits)" % (iwhere, res))
        dflt = item.get("default") or {}
        dreq = item.get("defaultRequest") or {}
        for res in set(dflt) | set(dreq):
            if is_gpu_resource_key(res) and res in dflt and res in dreq and str(dflt[res]) != str(dreq[res]):
                raise GpuOpsError("%s: default %s must equal defaultRequest %s for %s (GPUs cannot be overcommitted)"
                                  % (iwhere, dflt[res], dreq[res], res))
    return limits


def validate_priority_classes(classes):
    """Validate the PriorityClass definitions (name -> {value, preemption_policy, description, global_default})."""
    if not isinstance(classes, dict):
        raise GpuOpsError("priority classes must be a mapping of name -> {value, preemption_policy, description}")
    out = {}
    defaults = []
    for name in sorted(classes):
        spec = classes[name] or {}
        where = "priority class %r" % name
        if not DNS1123_SUBDOMAIN_RE.match(name) or len(name) > 253:
            raise GpuOpsError("%s: the name must be a DNS-1123 subdomain (lower case letters, digits, '-', '.')" % where)
        if name.startswith("system-"):
            raise GpuOpsError("%s: names starting with 'system-' are reserved for Kubernetes" % where)
        _check_keys(spec, ("value", "preemption_policy", "description", "global_default"), where)
        if "value" not in spec:
            raise GpuOpsError("%s: 'value' is required (an integer from %d to %d)" % (where, MIN_PRIORITY, MAX_USER_PRIORITY))
        value = _int(spec["value"], where + " value", MIN_PRIORITY, MAX_USER_PRIORITY)
        policy = _choice(spec.get("preemption_policy", "PreemptLowerPriority"), PREEMPTION_POLICIES,
                         where + " preemption_policy")
        if spec.get("global_default"):
            defaults.append(name)
        out[name] = {"value": value, "preemption_policy": policy, "description": spec.get("description") or "",
                     "global_default": bool(spec.get("global_default"))}
    if len(defaults) > 1:
        raise GpuOpsError("only one priority class may be the global default; got %s" % _fmt(defaults))
    return out


def plan_priority_classes(desired, existing, policy="fail"):
    """Compare desired classes with the existing objects (PriorityClass dicts from the API).

    ``value`` and ``preemptionPolicy`` are immutable. ``policy`` ``fail`` raises naming each
    changed class; ``replace`` returns them in ``replace`` (delete, then create again: running pods
    keep the priority they were admitted with). Returns ``{"replace": [names], "unchanged": [...],
    "create": [...]}``.
    """
    _choice(policy, PRIORITY_CHANGE_POLICIES, "priority class change policy")
    current = {}
    for obj in existing or []:
        meta = obj.get("metadata") or {}
        current[meta.get("name")] = obj
    plan = {"replace": [], "create": [], "update": [], "changes": {}}
    for name, spec in sorted(desired.items()):
        obj = current.get(name)
        if obj is None:
            plan["create"].append(name)
            continue
        changes = {}
        if int(obj.get("value", 0)) != spec["value"]:
            changes["value"] = {"before": int(obj.get("value", 0)), "after": spec["value"]}
        if (obj.get("preemptionPolicy") or "PreemptLowerPriority") != spec["preemption_policy"]:
            changes["preemptionPolicy"] = {"before": obj.get("preemptionPolicy") or "PreemptLowerPriority",
                                           "after": spec["preemption_policy"]}
        if changes:
            plan["replace"].append(name)
            plan["changes"][name] = changes
        else:
            plan["update"].append(name)
    if plan["replace"] and policy == "fail":
        parts = []
        for n in plan["replace"]:
            fields = sorted(plan["changes"][n].items())
            parts.append("%s: %s" % (n, ", ".join("%s %s -> %s" % (f, c["before"], c["after"]) for f, c in fields)))
        text = "; ".join(parts)
        raise GpuOpsError(
            "PriorityClass value and preemptionPolicy are immutable and would change (%s). Nothing was changed. Set "
            "gpu_tenancy_priority_class_change_policy: replace to delete and re-create these classes (running pods keep "
            "their current priority; new pods get the new value), or keep the existing values" % text,
            changes=plan["changes"])
    return plan


def validate_tenants(tenants, priority_classes=None):
    """Validate tenants and return their normalized quota objects.

    A tenant: ``{name, labels, annotations, pod_security, quota: {hard}, priority_quotas:
    {<class>: {hard}}, limit_range: [...], gpu_only, groups: {admin: [...], edit: [...], view: [...]}}``.
    Returns ``(tenants, warnings)`` with every ``hard`` normalized.
    """
    if not isinstance(tenants, list):
        raise GpuOpsError("tenants must be a list of {name, quota, ...}")
    known_classes = set(priority_classes or {}) | {"system-node-critical", "system-cluster-critical"}
    out = []
    warnings = []
    seen = set()
    valid_keys = ("name", "labels", "annotations", "pod_security", "pod_security_version", "quota",
                  "priority_quotas", "limit_range", "gpu_only", "groups", "queueing")
    for i, tenant in enumerate(tenants):
        if not isinstance(tenant, dict) or not tenant.get("name"):
            raise GpuOpsError("tenants[%d]: 'name' is required" % i)
        name = str(tenant["name"])
        where = "tenant %s" % name
        _check_keys(tenant, valid_keys, where)
        if not DNS1123_LABEL_RE.match(name) or len(name) > 63:
            raise GpuOpsError("%s: the name must be a DNS-1123 label (namespace name)" % where)
        if name in seen:
            raise GpuOpsError("%s is defined twice" % where)
        seen.add(name)
        t = copy.deepcopy(tenant)
        t["pod_security"] = _choice(t.get("pod_security", "baseline"), POD_SECURITY_LEVELS, where + " pod_security")
        t.setdefault("pod_security_version", "latest")
        hard, warns = normalize_quota_hard((t.get("quota") or {}).get("hard"), where + " quota")
        warnings.extend(warns)
        t["quota"] = {"hard": hard}
        pq = {}
        for pclass, spec in sorted((t.get("priority_quotas") or {}).items()):
            if pclass not in known_classes:
                raise GpuOpsError("%s priority_quotas: priority class %r is not defined; valid: %s"
                                  % (where, pclass, _fmt(sorted(known_classes))), valid_classes=sorted(known_classes))
            phard, warns = normalize_quota_hard((spec or {}).get("hard"), "%s priority_quotas[%s]" % (where, pclass))
            warnings.extend(warns)
            if not phard:
                raise GpuOpsError("%s priority_quotas[%s]: 'hard' must list at least one resource" % (where, pclass))
            pq[pclass] = {"hard": phard}
        t["priority_quotas"] = pq
        t["gpu_only"] = bool(t.get("gpu_only", False))
        if t.get("limit_range"):
            _validate_limit_range(name, t["limit_range"], t["gpu_only"])
        else:
            t["limit_range"] = []
        groups = t.get("groups") or {}
        _check_keys(groups, ("admin", "edit", "view"), where + " groups")
        t["groups"] = dict((role, list(groups.get(role) or [])) for role in ("admin", "edit", "view"))
        t["labels"] = dict(t.get("labels") or {})
        t["annotations"] = dict(t.get("annotations") or {})
        for lk, lv in t["labels"].items():
            if not LABEL_VALUE_RE.match(str(lv)) or len(str(lv)) > 63:
                raise GpuOpsError("%s label %s: %r is not a valid label value" % (where, lk, lv))
        out.append(t)
    return out, warnings


def tenant_gpu_caps(tenant):
    """The most of each GPU resource a tenant can hold, from its quotas.

    The unscoped quota caps every pod of the namespace. Without it, the tenant can hold the sum of
    its PriorityClass-scoped quotas (pods of other classes are then uncapped; ``uncapped`` says so).
    """
    caps = gpu_quota_totals(tenant["quota"]["hard"])
    scoped = {}
    for spec in tenant.get("priority_quotas", {}).values():
        for res, qty in gpu_quota_totals(spec["hard"]).items():
            scoped[res] = scoped.get(res, 0) + qty
    uncapped = []
    for res, qty in scoped.items():
        if res not in caps:
            caps[res] = qty
            uncapped.append(res)
    return caps, sorted(uncapped)


def cluster_gpu_allocatable(nodes):
    """Sum the GPU extended resources of Node objects' ``status.allocatable`` (unschedulable nodes excluded)."""
    totals = {}
    per_node = {}
    for node in nodes or []:
        meta = node.get("metadata") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for res, qty in alloc.items():
            if not str(res).startswith("nvidia.com/"):
                continue
            try:
                n = _quantity_int(qty, "node %s %s" % (meta.get("name"), res))
            except GpuOpsError:
                continue
            totals[res] = totals.get(res, 0) + n
            per_node.setdefault(meta.get("name"), {})[res] = n
    return totals, per_node


def capacity_check(tenants, nodes, policy="fail"):
    """Sum of tenant GPU quotas per resource vs the cluster's allocatable GPUs and MIG slices.

    ``policy``: ``fail`` raises on overcommit, ``warn`` returns warnings, ``ignore`` only reports.
    Returns ``{"resources": {res: {"quota", "allocatable", "overcommitted", "tenants"}}, "overcommitted": [...],
    "warnings": [...]}``.
    """
    _choice(policy, CAPACITY_POLICIES, "capacity policy")
    allocatable, _per_node = cluster_gpu_allocatable(nodes)
    report = {}
    warnings = []
    for tenant in tenants:
        caps, uncapped = tenant_gpu_caps(tenant)
        for res, qty in caps.items():
            entry = report.setdefault(res, {"quota": 0, "allocatable": allocatable.get(res, 0), "tenants": {}})
            entry["quota"] += qty
            entry["tenants"][tenant["name"]] = qty
        for res in uncapped:
            warnings.append("tenant %s has only PriorityClass-scoped quotas for %s: pods of other priority classes "
                            "are not capped" % (tenant["name"], res))
    over = []
    for res, entry in sorted(report.items()):
        entry["overcommitted"] = entry["quota"] > entry["allocatable"]
        if entry["overcommitted"]:
            over.append(res)
    result = {"resources": report, "allocatable": allocatable, "overcommitted": over, "warnings": warnings}
    if over:
        lines = ["%s: tenant quotas %d > allocatable %d (%s)" % (
            res, report[res]["quota"], report[res]["allocatable"],
            ", ".join("%s=%d" % kv for kv in sorted(report[res]["tenants"].items()))) for res in over]
        msg = ("GPU quota overcommit: " + "; ".join(lines) + ". Lower the quotas, add capacity, or set "
               "gpu_tenancy_capacity_policy: warn to accept the overcommit")
        if policy == "fail":
            raise GpuOpsError(msg, capacity=report, allocatable=allocatable)
        if policy == "warn":
            warnings.append(msg)
    return result


# --------------------------------------------------------------------------------------------
# HPA (autoscaling/v2)

def _validate_scaling_rules(rules, where):
    if rules is None:
        return None
    _check_keys(rules, ("stabilizationWindowSeconds", "selectPolicy", "policies", "tolerance"), where)
    out = copy.deepcopy(rules)
    if "stabilizationWindowSeconds" in rules:
        out["stabilizationWindowSeconds"] = _int(rules["stabilizationWindowSeconds"], where + " stabilizationWindowSeconds",
                                                 0, HPA_MAX_STABILIZATION_WINDOW)
    if "selectPolicy" in rules:
        _choice(rules["selectPolicy"], HPA_SELECT_POLICIES, where + " selectPolicy")
    policies = rules.get("policies")
    if policies is not None:
        if not isinstance(policies, list) or (not policies and rules.get("selectPolicy") != "Disabled"):
            raise GpuOpsError("%s policies: give at least one {type: Pods|Percent, value, periodSeconds}" % where)
        out["policies"] = []
        for i, pol in enumerate(policies):
            pwhere = "%s policies[%d]" % (where, i)
            _check_keys(pol, ("type", "value", "periodSeconds"), pwhere)
            for req in ("type", "value", "periodSeconds"):
                if req not in pol:
                    raise GpuOpsError("%s: '%s' is required" % (pwhere, req))
            out["policies"].append({
                "type": _choice(pol["type"], HPA_POLICY_TYPES, pwhere + " type"),
                "value": _int(pol["value"], pwhere + " value", 1),
                "periodSeconds": _int(pol["periodSeconds"], pwhere + " periodSeconds", 1, HPA_MAX_PERIOD),
            })
    if "tolerance" in rules:
        raise GpuOpsError("%s: 'tolerance' is an alpha field (HPAConfigurableTolerance); set it on the cluster-wide "
                          "--horizontal-pod-autoscaler-tolerance instead" % where)
    return out


_QTY_RE = re.compile(r"^(\d+(\.\d+)?|\.\d+)(m|k|M|G|Ki|Mi|Gi)?$")
_QTY_MULT = {None: 1.0, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0 ** 2, "Gi": 1024.0 ** 3}


def parse_quantity(value, where):
    text = str(value).strip()
    m = _QTY_RE.match(text)
    if not m:
        raise GpuOpsError("%s: %r is not a Kubernetes quantity (for example 700m, 0.7, 20, 250)" % (where, value))
    return float(m.group(1)) * _QTY_MULT[m.group(3)]


# GPU metrics the dcgm_exporter role's adapter rules expose per pod, with their range.
GPU_POD_METRICS = {
    "gpu_engine_active": {"series": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "max": 1.0,
                          "help": "graphics engine active ratio 0-1 (works on MIG)"},
    "gpu_utilization_percent": {"series": "DCGM_FI_DEV_GPU_UTIL", "max": 100.0,
                                "help": "GPU utilisation percent 0-100 (always 0 on MIG)"},
    "gpu_memory_used_mib": {"series": "DCGM_FI_DEV_FB_USED", "max": None, "help": "framebuffer used, MiB"},
    "gpu_tensor_active": {"series": "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "max": 1.0, "help": "tensor pipe active ratio 0-1"},
}


def validate_hpa(hpa):
    """Validate one HPA definition of the gpu_autoscaling role and return the autoscaling/v2 spec parts.

    Input: ``{name, namespace, target: {kind, name, api_version}, min_replicas, max_replicas, gpu_metric:
    {name, average_value}, latency_metric: {name, average_value}, metrics: [native MetricSpec], behavior}``.
    """
    if not isinstance(hpa, dict) or not hpa.get("name"):
        raise GpuOpsError("each HPA needs a 'name'")
    where = "HPA %s" % hpa["name"]
    _check_keys(hpa, ("name", "namespace", "target", "min_replicas", "max_replicas", "gpu_metric", "latency_metric",
                      "metrics", "behavior", "labels"), where)
    if not DNS1123_SUBDOMAIN_RE.match(str(hpa["name"])):
        raise GpuOpsError("%s: the name must be a DNS-1123 subdomain" % where)
    if not hpa.get("namespace"):
        raise GpuOpsError("%s: 'namespace' is required" % where)
    target = _check_keys(hpa.get("target") or {}, ("kind", "name", "api_version"), where + " target")
    if not target.get("name"):
        raise GpuOpsError("%s target: 'name' (the Deployment to scale) is required" % where)
    min_r = _int(hpa.get("min_replicas", 1), where + " min_replicas", 1)
    max_r = _int(hpa.get("max_replicas", min_r), where + " max_replicas", 1)
    if min_r > max_r:
        raise GpuOpsError("%s: min_replicas (%d) must be <= max_replicas (%d)" % (where, min_r, max_r))
    metrics = []
    gm = hpa.get("gpu_metric")
    if gm:
        _check_keys(gm, ("name", "average_value"), where + " gpu_metric")
        mname = _choice(gm.get("name", "gpu_engine_active"), sorted(GPU_POD_METRICS), where + " gpu_metric.name")
        if "average_value" not in gm:
            raise GpuOpsError("%s gpu_metric: 'average_value' (the per-pod target) is required" % where)
        val = parse_quantity(gm["average_value"], where + " gpu_metric.average_value")
        top = GPU_POD_METRICS[mname]["max"]
        if val <= 0:
            raise GpuOpsError("%s gpu_metric.average_value must be positive" % where)
        if top is not None and val > top:
            raise GpuOpsError("%s gpu_metric: %s is %s, so a target of %s never triggers; use a value up to %s "
                              "(for example %s)" % (where, mname, GPU_POD_METRICS[mname]["help"], gm["average_value"],
                                                    top, "700m" if top == 1.0 else "70"))
        metrics.append({"type": "Pods", "pods": {"metric": {"name": mname},
                                                 "target": {"type": "AverageValue", "averageValue": str(gm["average_value"])}}})
    lm = hpa.get("latency_metric")
    if lm:
        _check_keys(lm, ("name", "average_value"), where + " latency_metric")
        if not lm.get("name") or "average_value" not in lm:
            raise GpuOpsError("%s latency_metric: 'name' and 'average_value' are required" % where)
        if parse_quantity(lm["average_value"], where + " latency_metric.average_value") <= 0:
            raise GpuOpsError("%s latency_metric.average_value must be positive" % where)
        metrics.append({"type": "Pods", "pods": {"metric": {"name": str(lm["name"])},
                                                 "target": {"type": "AverageValue", "averageValue": str(lm["average_value"])}}})
    for i, m in enumerate(hpa.get("metrics") or []):
        mwhere = "%s metrics[%d]" % (where, i)
        mtype = _choice((m or {}).get("type"), ("Pods", "Object", "External", "Resource", "ContainerResource"),
                        mwhere + " type")
        if mtype == "Pods":
            tgt = ((m.get("pods") or {}).get("target") or {})
            if tgt.get("type") != "AverageValue" or "averageValue" not in tgt:
                raise GpuOpsError("%s: Pods metrics only support target type AverageValue with a positive "
                                  "averageValue" % mwhere)
        if mtype == "External":
            tgt = ((m.get("external") or {}).get("target") or {})
            if "value" in tgt and "averageValue" in tgt:
                raise GpuOpsError("%s: may not set both a target value and a per-pod averageValue" % mwhere)
        metrics.append(copy.deepcopy(m))
    if not metrics:
        raise GpuOpsError("%s: no metric; set gpu_metric, latency_metric or metrics" % where)
    behavior = hpa.get("behavior")
    out_behavior = None
    if behavior:
        _check_keys(behavior, ("scaleUp", "scaleDown"), where + " behavior")
        out_behavior = {}
        for direction in ("scaleUp", "scaleDown"):
            if behavior.get(direction) is not None:
                out_behavior[direction] = _validate_scaling_rules(behavior[direction], "%s behavior.%s" % (where, direction))
    return {
        "name": str(hpa["name"]),
        "namespace": str(hpa["namespace"]),
        "labels": dict(hpa.get("labels") or {}),
        "scaleTargetRef": {"apiVersion": target.get("api_version", "apps/v1"), "kind": target.get("kind", "Deployment"),
                           "name": str(target["name"])},
        "minReplicas": min_r,
        "maxReplicas": max_r,
        "metrics": metrics,
        "behavior": out_behavior,
    }


def validate_hpas(hpas):
    if not isinstance(hpas, list):
        raise GpuOpsError("HPAs must be a list")
    out = []
    seen = set()
    for hpa in hpas:
        spec = validate_hpa(hpa)
        key = (spec["namespace"], spec["name"])
        if key in seen:
            raise GpuOpsError("HPA %s/%s is defined twice" % key)
        seen.add(key)
        out.append(spec)
    return out


# --------------------------------------------------------------------------------------------
# DCGM exporter metrics

DCGM_METRIC_TYPES = ("gauge", "counter", "label")
DCGM_PROFILING_MIG_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


# dcgm-exporter -d / DCGM_EXPORTER_DEVICES_STR (pkg/cmd/app.go parseDeviceOptions): f, g[:range], i[:range];
# a range is comma-separated indexes or a-b spans.
_DCGM_DEVICES_RE = re.compile(r"^(f|[gi](:[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)?)$")


def validate_dcgm_devices(value):
    """The devices dcgm-exporter watches (DCGM_EXPORTER_DEVICES_STR); GpuOpsError naming the valid forms."""
    text = "" if value is None else str(value)
    if not _DCGM_DEVICES_RE.match(text):
        raise GpuOpsError("DCGM_EXPORTER_DEVICES_STR (dcgm_exporter_devices) %r is not valid; valid values: f (GPUs, or "
                          "their GPU instances where MIG is enabled), g[:range] (GPUs), i[:range] (GPU instances), "
                          "a range being indexes or spans such as 0,2-4" % text, valid_values=["f", "g[:range]", "i[:range]"])
    return text


# DCGM profiling (DCP) fields are ratios and rates (bytes per second): gauges in dcgm-exporter's own CSVs.
_DCGM_GAUGE_PREFIXES = ("DCGM_FI_PROF_",)


def validate_dcgm_metrics(metrics):
    """Validate the metrics list ``[{field, type, help}]``; returns the CSV text the exporter reads."""
    if not isinstance(metrics, list) or not metrics:
        raise GpuOpsError("DCGM exporter metrics: give at least one {field, type, help}")
    lines = []
    seen = set()
    for i, m in enumerate(metrics):
        where = "DCGM exporter metrics[%d]" % i
        _check_keys(m, ("field", "type", "help"), where)
        field = str(m.get("field") or "")
        if not re.match(r"^DCGM_(FI|EXP)_[A-Z0-9_]+$", field):
            raise GpuOpsError("%s: %r is not a DCGM field name (DCGM_FI_... or DCGM_EXP_...)" % (where, field))
        if field in seen:
            raise GpuOpsError("%s: %s is listed twice" % (where, field))
        seen.add(field)
        mtype = _choice(m.get("type", "gauge"), DCGM_METRIC_TYPES, where + " type")
        if mtype == "counter" and field.startswith(_DCGM_GAUGE_PREFIXES):
            raise GpuOpsError("%s: %s is a ratio or a rate (DCGM profiling field), a gauge upstream, not a counter; "
                              "rate() over it is meaningless" % (where, field))
        text = str(m.get("help") or field).replace(",", ";").replace("\n", " ")
        lines.append("%s, %s, %s" % (field, mtype, text))
    return "\n".join(lines) + "\n"
