# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA device plugin configs (NVIDIA/k8s-device-plugin v0.20.0, api/config/v1): named configs validated,
per-node config selection, and what a config makes a node advertise.

Pure Python, no Kubernetes client, Python 3.9 compatible. Errors name the valid values; facts follow
shared/reference/k8s-gpu-stack.md.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog.resources import SHARED_SUFFIX, check_gpu_resource
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.validation import CONFIGMAP_KEY_RE, LABEL_VALUE_RE, check_keys, choice, fmt, integer

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
        raise GpuOpsError("%s must be one of %s or a list of them, got %r" % (where, fmt(DEVICE_LIST_STRATEGIES), value))
    for item in items:
        choice(item, DEVICE_LIST_STRATEGIES, where)
    if len(set(items)) != len(items):
        raise GpuOpsError("%s lists a strategy twice: %r" % (where, value))
    if isinstance(value, str) and len(items) == 1:
        return items[0]
    return items


def validate_device_plugin_config(name: str, config: Dict[str, Any]) -> Tuple[Any, ...]:
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
    check_keys(cfg, _CONFIG_KEYS, where)
    version = cfg.get("version") or "v1"
    if version != "v1":
        raise GpuOpsError("%s: version %r is unknown; the only valid version is v1" % (where, version))
    cfg["version"] = "v1"
    flags = check_keys(cfg.get("flags") or {}, _FLAGS_KEYS, where + " flags")
    strategy = choice(flags.get("migStrategy", "none"), MIG_STRATEGIES, where + " flags.migStrategy")
    flags["migStrategy"] = strategy
    if "deviceDiscoveryStrategy" in flags:
        choice(flags["deviceDiscoveryStrategy"], DISCOVERY_STRATEGIES, where + " flags.deviceDiscoveryStrategy")
    plugin = check_keys(flags.get("plugin") or {}, _PLUGIN_FLAGS_KEYS, where + " flags.plugin")
    if "deviceListStrategy" in plugin:
        plugin["deviceListStrategy"] = _device_list_strategy(plugin["deviceListStrategy"],
                                                             where + " flags.plugin.deviceListStrategy")
    if "deviceIDStrategy" in plugin:
        choice(plugin["deviceIDStrategy"], DEVICE_ID_STRATEGIES, where + " flags.plugin.deviceIDStrategy")
    if "sharedDevicesAllocationPolicy" in plugin:
        choice(plugin["sharedDevicesAllocationPolicy"], ALLOCATION_POLICIES,
               where + " flags.plugin.sharedDevicesAllocationPolicy")
    if plugin.get("passDeviceSpecs"):
        warnings.append("%s: passDeviceSpecs only exists for CPUManager compatibility and needs a privileged "
                        "device plugin (set device_plugin_privileged: true)" % where)
    if plugin:
        flags["plugin"] = plugin
    if "gfd" in flags:
        check_keys(flags["gfd"] or {}, _GFD_FLAGS_KEYS, where + " flags.gfd")
    cfg["flags"] = flags
    if cfg.get("resources"):
        warnings.append("%s: the top-level 'resources' field is ignored by the device plugin %s (resource "
                        "renaming is not supported); it was dropped" % (where, DEVICE_PLUGIN_VERSION))
    cfg.pop("resources", None)
    if "imex" in cfg:
        imex = check_keys(cfg["imex"] or {}, ("channelIDs", "required"), where + " imex")
        ids = imex.get("channelIDs", [])
        if ids not in ([], [0]):
            raise GpuOpsError("%s imex.channelIDs: %r is not valid; valid values: [] or [0]" % (where, ids))

    sharing = check_keys(cfg.get("sharing") or {}, SHARING_KINDS, where + " sharing")
    active = []
    replicas_seen = []
    for kind in SHARING_KINDS:
        if kind not in sharing:
            continue
        rep = check_keys(sharing[kind] or {}, _REPLICATED_KEYS, "%s sharing.%s" % (where, kind))
        resources = rep.get("resources") or []
        if not resources:
            raise GpuOpsError("%s sharing.%s: no resources specified; list at least one "
                              "{name: nvidia.com/gpu, replicas: N>=2}" % (where, kind))
        names = set()
        for i, res in enumerate(resources):
            rwhere = "%s sharing.%s.resources[%d]" % (where, kind, i)
            check_keys(res, _REPLICATED_RESOURCE_KEYS, rwhere)
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
            res["replicas"] = integer(res["replicas"], rwhere + " replicas", minimum=2)
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


def device_plugin_config_effect(name: str, config: Dict[str, Any]) -> Dict[str, Any]:
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


def node_device_plugin_config(labels: Dict[str, Any], plugin: Optional[Dict[str, Any]]) -> Optional[str]:
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


def validate_device_plugin(configs: Optional[Dict[str, Any]], default_config: str, node_configs: Optional[Dict[str, Any]] = None,
                           gfd_enabled: bool = True, mps_root: str = "/run/nvidia/mps") -> Dict[str, Any]:
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
                          % (default_config, fmt(sorted(out))), valid_configs=sorted(out))
    node_configs = node_configs or {}
    for node, cname in sorted(node_configs.items()):
        if cname not in out:
            raise GpuOpsError(
                "node %s: device plugin config %r does not exist (the config-manager would exit and the device "
                "plugin would not start on that node); valid names: %s" % (node, cname, fmt(sorted(out))),
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
