# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic MIG through DRA partitionable devices (KEP-4815, ``resource.k8s.io/v1``): slices and steering rules.

Pure Python, Python 3.9 compatible. What NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, gate
``DynamicMIG``) publishes for a node, made from ``gpu_info`` facts and the catalog:

* one pool per node (pool name = node name, driver ``gpu.nvidia.com``); the first slice holds only
  ``spec.sharedCounters`` (one counter set per MIG-capable GPU), then one device slice per GPU (a slice holds
  either counters or devices, never both, since Kubernetes 1.35), devices sorted by name (the scheduler takes the
  first device that fits, walking the pool's slices sorted by name - k8s.io/dynamic-resource-allocation
  ``GatherPools`` - and each slice's devices in order);
* counter set ``gpu-<minor>-counter-set``: ``multiprocessors``, ``copy-engines``, ``decoders``, ``encoders``,
  ``jpeg-engines``, ``ofa-engines``, ``memory`` (bytes) - each the largest value any profile has, as the driver
  does - and ``memory-slice-<i>`` = 1 for every memory slice;
* the whole GPU ``gpu-<minor>`` consumes all of it (not published on Ampere, where MIG mode must stay on); a MIG
  device ``gpu-<minor>-mig-<profile without dots, '+' as '-'>-<GI profile id>-<placement start>`` for every
  profile x placement of the catalog consumes its capacities and its memory slices at its placement;
* a GPU without MIG support is one device ``gpu-<minor>`` with a ``memory`` capacity and no counter set.

``steering_rules`` turns a plan (``{gpu index: [{profile, start}]}``, the placements to keep open) into
``DeviceTaintRule`` objects (``resource.k8s.io/v1``, Kubernetes 1.37) that close every other device of those GPUs
with a NoSchedule taint, so the scheduler's first fit lands where the plan wants it.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.tenancy import dra as gpu_dra

MAX_DEVICES_PER_SLICE = 64  # resource.k8s.io/v1 ResourceSliceMaxDevicesWithAdvancedFeatures (counters in use)
MAX_COUNTER_SETS_PER_SLICE = 8  # ResourceSliceMaxCounterSets
STEERING_TAINT_KEY = "gpuops.k8s/steering"
MIB = 1024 * 1024

# Device capacity name -> counter name (the driver derives counter names from capacities, camelCase -> dashes).
CAPACITIES = (
    ("multiprocessors", "multiprocessors"),
    ("copyEngines", "copy-engines"),
    ("decoders", "decoders"),
    ("encoders", "encoders"),
    ("jpegEngines", "jpeg-engines"),
    ("ofaEngines", "ofa-engines"),
    ("memory", "memory"),
)


def counter_set_name(minor: int) -> str:
    return "gpu-%d-counter-set" % int(minor)


def memory_slice_counter(i: int) -> str:
    return "memory-slice-%d" % int(i)


def profile_name_part(profile_name: str) -> str:
    """``1g.10gb`` -> ``1g10gb``; ``1g.10gb+me`` -> ``1g10gb-me`` (dots dropped, then made a DNS label)."""
    text = re.sub(r"[^a-z0-9-]", "-", str(profile_name).lower().replace(".", ""))
    return text.strip("-")


def mig_device_name(minor: int, profile: gpu_catalog.GiProfile, start: int) -> str:
    """The driver's name of MIG device ``profile`` (GiProfile) at memory slice ``start`` of GPU ``minor``."""
    return "gpu-%d-mig-%s-%d-%d" % (int(minor), profile_name_part(profile.name), profile.profile_id, int(start))


MIG_DEVICE_NAME_RE = re.compile(r"^gpu-(\d+)-mig-([a-z0-9]+(?:-[a-z0-9]+)*)-(\d+)-(\d+)$")
WHOLE_GPU_NAME_RE = re.compile(r"^gpu-(\d+)$")


def _model_of(model):
    if isinstance(model, gpu_catalog.GpuModel):
        return model
    found = gpu_catalog.lookup_model(model) if model is not None else None
    if found is None:
        raise GpuOpsError("GPU model %r is not in the catalog; known models: %s"
                          % (model, ", ".join(gpu_catalog.model_keys())), valid_models=gpu_catalog.model_keys())
    return found


def device_gpu_minor(name: Any) -> int:
    """The GPU minor of a device name of the driver (``gpu-<minor>`` or ``gpu-<minor>-mig-...``)."""
    text = str(name or "")
    m = WHOLE_GPU_NAME_RE.match(text) or MIG_DEVICE_NAME_RE.match(text)
    if m is None:
        raise GpuOpsError("device %r is not a device of the DynamicMIG driver: expected gpu-<minor> or "
                          "gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart> (e.g. gpu-0-mig-3g40gb-9-4)"
                          % (text,))
    return int(m.group(1))


def parse_device_name(name: Any, model: Any) -> Dict[str, Any]:
    """The placement a device name of the driver stands for, on a GPU of ``model`` (GpuModel or catalog key).

    ``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>`` -> ``{"minor", "profile" (canonical name),
    "profile_id", "start", "size"}`` (memory slices); the whole GPU ``gpu-<minor>`` -> ``profile`` None,
    ``start`` 0 and ``size`` all memory slices. The reverse of ``mig_device_name``; a name that is no device the
    driver publishes for ``model`` is refused naming the valid forms.
    """
    text = str(name or "")
    minor = device_gpu_minor(text)
    m_obj = _model_of(model)
    whole = WHOLE_GPU_NAME_RE.match(text)
    if whole:
        return {"minor": minor, "profile": None, "profile_id": None, "start": 0, "size": int(m_obj.memory_slices)}
    m = MIG_DEVICE_NAME_RE.match(text)
    if m is None:  # device_gpu_minor matched one of the two forms
        raise GpuOpsError("device %r: unparsable" % (text,))
    minor, part, profile_id, start = int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4))
    known = ["%s-%d (%s)" % (profile_name_part(p.name), p.profile_id, p.name) for p in m_obj.profiles]
    for p in m_obj.profiles:
        if profile_name_part(p.name) != part or int(p.profile_id) != profile_id:
            continue
        if start not in p.placements:
            raise GpuOpsError("device %r: %s (GI profile %d) on %s has no placement starting at memory slice %d; "
                              "valid starts: %s" % (text, p.name, p.profile_id, m_obj.marketing_name, start,
                                                    ", ".join(str(s) for s in p.placements)),
                              valid_placements=list(p.placements))
        return {"minor": minor, "profile": p.name, "profile_id": int(p.profile_id), "start": start,
                "size": int(p.memory_slices)}
    raise GpuOpsError("device %r: %s has no MIG profile %s with GI profile id %d; its profiles: %s"
                      % (text, m_obj.marketing_name, part, profile_id, ", ".join(known) or "none (no MIG)"),
                      valid_profiles=[p.name for p in m_obj.profiles])


def profile_capacities(model: gpu_catalog.GpuModel, profile: gpu_catalog.GiProfile) -> Dict[str, int]:
    """``{capacity: int}`` of one GPU instance of ``profile``: SMs, engines (``catalog.profile_engines``), bytes."""
    if profile.sm is None:
        raise GpuOpsError("%s: the catalog has no multiprocessor count for %s; dynamic MIG needs it"
                          % (model.marketing_name, profile.name))
    eng = gpu_catalog.profile_engines(model, profile)
    return {"multiprocessors": int(profile.sm), "copyEngines": eng["copy"], "decoders": eng["decoder"],
            "encoders": eng["encoder"], "jpegEngines": eng["jpeg"], "ofaEngines": eng["ofa"],
            "memory": int(profile.memory_mib) * MIB}


def full_capacities(model: gpu_catalog.GpuModel) -> Dict[str, int]:
    """The largest value of each capacity over all profiles (what the driver gives the counter set)."""
    out = {}
    for p in model.profiles:
        for key, value in profile_capacities(model, p).items():
            out[key] = max(out.get(key, 0), value)
    return out


def _qty(key, value):
    return "%dMi" % (value // MIB) if key == "memory" and value % MIB == 0 else "%d" % value


def _capacity(caps):
    return dict((key, {"value": _qty(key, caps[key])}) for key, _c in CAPACITIES)


def _counters(caps, start, size):
    out = dict((counter, {"value": _qty(key, caps[key])}) for key, counter in CAPACITIES)
    for i in range(start, start + size):
        out[memory_slice_counter(i)] = {"value": "1"}
    return out


def _gpu_model(g, node):
    model = gpu_catalog.lookup_model(g.get("model") or g.get("pci_device_id"), g.get("name"))
    if model is None:
        raise GpuOpsError("node %s: GPU %s (%s) is not in the catalog, so its counters are unknown; known models: %s"
                          % (node, g.get("index"), g.get("name") or g.get("pci_device_id"),
                             ", ".join(gpu_catalog.model_keys())), valid_models=gpu_catalog.model_keys())
    return model


def gpu_resources(node: str, host: Mapping[str, Any],
                  g: Mapping[str, Any]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(counter_sets, devices)`` the driver publishes for one GPU of ``host`` (its gpu_info facts)."""
    model = _gpu_model(g, node)
    minor = int(g.get("minor", g["index"]))
    driver = gpu_dra._semver(host.get("driver_version"))
    cuda = gpu_dra._semver(host.get("cuda_driver_version"))
    common = {
        "productName": {"string": str(g.get("name") or "")},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": str(model.architecture).capitalize()},
        "driverVersion": {"version": driver},
        "cudaDriverVersion": {"version": cuda},
    }
    uuid = str(g.get("uuid") or "")
    gpu_attrs = dict(common, type={"string": "gpu"}, uuid={"string": uuid}, index={"int": int(g["index"])})
    if not gpu_catalog.mig_capable(model):
        return [], [{"name": "gpu-%d" % minor, "attributes": gpu_attrs,
                     "capacity": {"memory": {"value": "%dMi" % int(g.get("memory_total_mib") or model.total_memory_mib)}}}]
    if gpu_catalog.mig_mode_needs_reset(model) and not g.get("mig_mode_current"):
        raise GpuOpsError("node %s: GPU %d (%s) is an Ampere GPU with MIG mode off; dynamic MIG needs MIG mode on "
                          "beforehand there (a GPU reset): run gpuops.k8s.mig_mode with mode: enabled first"
                          % (node, int(g["index"]), model.marketing_name))
    full = full_capacities(model)
    cset = counter_set_name(minor)
    devices = []
    if not gpu_catalog.mig_mode_needs_reset(model):
        devices.append({"name": "gpu-%d" % minor, "attributes": gpu_attrs, "capacity": _capacity(full),
                        "consumesCounters": [{"counterSet": cset,
                                              "counters": _counters(full, 0, model.memory_slices)}]})
    for p in model.profiles:
        caps = profile_capacities(model, p)
        attrs = dict(common, type={"string": "mig"}, profile={"string": p.name}, parentUUID={"string": uuid},
                     parentIndex={"int": int(g["index"])})
        for start in p.placements:
            devices.append({"name": mig_device_name(minor, p, start), "attributes": attrs,
                            "capacity": _capacity(caps),
                            "consumesCounters": [{"counterSet": cset,
                                                  "counters": _counters(caps, start, p.memory_slices)}]})
    devices.sort(key=lambda d: d["name"])
    return [{"name": cset, "counters": _counters(full, 0, model.memory_slices)}], devices


def resource_slices(node: Any, host: Any, generation: int = 1) -> List[Dict[str, Any]]:
    """The ResourceSlices of one node in dynamic MIG mode: the counter slice first, then the device slices."""
    if not validation.DNS1123_SUBDOMAIN_RE.match(str(node or "")) or len(str(node)) > 253:
        raise GpuOpsError("node name %r is not a valid Kubernetes node name" % (node,))
    if not isinstance(host, dict) or not isinstance(host.get("gpus"), list):
        raise GpuOpsError("host facts must be the result of gpuops.k8s.gpu_info (a mapping with 'gpus')")
    gpus = [g for g in host["gpus"] if not g.get("lost")]
    per_gpu = [(g, gpu_resources(node, host, g)) for g in sorted(gpus, key=lambda x: int(x.get("minor", x["index"])))]
    if gpus and not any(sets for _g, (sets, _d) in per_gpu):
        names = sorted(set(str(g.get("name")) for g in gpus))
        mig = [k for k in gpu_catalog.model_keys() if gpu_catalog.mig_capable(gpu_catalog.CATALOG[k])]
        raise GpuOpsError("node %s: dynamic MIG needs a MIG-capable GPU, and %s has none (%s); MIG-capable models: %s; "
                          "publish it with dynamic: false" % (node, node, ", ".join(names), ", ".join(mig)),
                          valid_models=mig)
    counter_sets = [s for _g, (sets, _d) in per_gpu for s in sets]
    device_groups = []
    for _g, (_s, devices) in per_gpu:
        for i in range(0, len(devices), MAX_DEVICES_PER_SLICE):
            device_groups.append(devices[i:i + MAX_DEVICES_PER_SLICE])
    counter_groups = [counter_sets[i:i + MAX_COUNTER_SETS_PER_SLICE]
                      for i in range(0, len(counter_sets), MAX_COUNTER_SETS_PER_SLICE)]
    count = len(counter_groups) + len(device_groups)
    base = "%s-%s" % (node, gpu_dra.DRIVER.replace(".", "-"))
    out = []

    def make(suffix, body):
        spec = {"driver": gpu_dra.DRIVER, "nodeName": node,
                "pool": {"name": node, "generation": int(generation), "resourceSliceCount": count}}
        spec.update(body)
        out.append({"apiVersion": gpu_dra.DRA_API, "kind": "ResourceSlice",
                    "metadata": {"name": "%s-%s" % (base, suffix),
                                 "labels": {"app.kubernetes.io/managed-by": "gpuops.k8s"}},
                    "spec": spec})

    # the scheduler walks a pool's slices sorted by name: zero-padded numbers keep the publishing order
    for i, sets in enumerate(counter_groups):
        make("counters-%03d" % i, {"sharedCounters": sets})
    for i, devices in enumerate(device_groups):
        make("devices-%03d" % i, {"devices": devices})
    return out


def _qty_int(text):
    text = str(text)
    return int(text[:-2]) * MIB if text.endswith("Mi") else int(text)


def slice_devices(slices: Optional[Sequence[Any]]) -> Tuple[Dict[str, Any], Dict[str, Dict[str, int]]]:
    """``{device name: device}`` and ``{counter set: {counter: int}}`` of a node's slices."""
    devices, sets = {}, {}
    for s in slices or []:
        spec = (s or {}).get("spec") or {}
        for cs in spec.get("sharedCounters") or []:
            sets[cs["name"]] = dict((k, _qty_int(v["value"])) for k, v in cs["counters"].items())
        for d in spec.get("devices") or []:
            devices[d["name"]] = d
    return devices, sets


def admission(slices: Optional[Sequence[Any]]) -> Callable[[List[str]], bool]:
    """A function ``admit(names)``: whether the devices ``names`` of ``slices`` can be allocated together (their
    counters fit their counter sets), as the scheduler checks it."""
    devices, sets = slice_devices(slices)
    cost = {}
    for name, d in devices.items():
        cost[name] = [(c["counterSet"], k, _qty_int(v["value"]))
                      for c in d.get("consumesCounters") or [] for k, v in c["counters"].items()]

    def admit(names):
        if len(set(names)) != len(names):
            return False
        used = {}
        for n in names:
            for cset, k, v in cost[n]:
                used[(cset, k)] = used.get((cset, k), 0) + v
        return all(v <= sets.get(cset, {}).get(k, 0) for (cset, k), v in used.items())
    return admit


def counters_admit(slices: Optional[Sequence[Any]], names: Iterable[str]) -> bool:
    """Whether the devices ``names`` can be allocated together (their counters fit their counter sets)."""
    return admission(slices)(list(names))


def first_fit(slices: Optional[Sequence[Any]], profiles: Iterable[Any],
              closed: Iterable[str] = ()) -> List[Optional[str]]:
    """The scheduler's rule as a model: each request (a profile) takes the first open device, in slice order,
    whose counters still fit. Returns the device names (None where nothing fits)."""
    order = []
    for s in slices or []:
        for d in ((s or {}).get("spec") or {}).get("devices") or []:
            order.append(d)
    taken = []
    out = []
    closed = set(closed)
    admit = admission(slices)
    for want in profiles:
        want = gpu_catalog.canonical_profile_name(want)
        pick = None
        for d in order:
            attrs = d.get("attributes") or {}
            if d["name"] in closed or (attrs.get("profile") or {}).get("string") != want or d["name"] in taken:
                continue
            if admit(taken + [d["name"]]):
                pick = d["name"]
                break
        if pick is not None:
            taken.append(pick)
        out.append(pick)
    return out


def _gpu_of(device):
    m = re.match(r"^gpu-(\d+)(?:-mig-.+-(\d+)-(\d+))?$", device["name"])
    return int(m.group(1)) if m else None


def steering_rules(slices: Sequence[Any], open_map: Any, effect: str = "NoSchedule") -> List[Dict[str, Any]]:
    """DeviceTaintRules closing every device of the GPUs in ``open_map`` but the open placements.

    ``open_map``: ``{"<gpu index>": [{"profile": "4g.40gb", "start": 0}, ...]}`` (an empty list closes the GPU).
    """
    if effect not in ("NoSchedule", "NoExecute"):
        raise GpuOpsError("effect must be one of NoSchedule, NoExecute, not %r" % (effect,))
    devices, _sets = slice_devices(slices)
    if not devices:
        raise GpuOpsError("no devices in the slices given: pass the node's slices from dra_resource_slices")
    pools: Set[Tuple[Any, Any]] = set()
    for s in slices:
        spec = s.get("spec") or {}
        if spec.get("devices"):
            pools.add((spec.get("driver"), (spec.get("pool") or {}).get("name")))
    if len(pools) != 1:
        raise GpuOpsError("the slices must be one node's pool; got %d pools" % len(pools))
    driver, pool = pools.pop()
    if not isinstance(open_map, dict):
        raise GpuOpsError("open must be a mapping {gpu index: [{profile, start}]}, not %s" % type(open_map).__name__)
    by_gpu = {}
    for d in devices.values():
        gpu = d.get("attributes", {}).get("parentIndex", d.get("attributes", {}).get("index", {})).get("int")
        by_gpu.setdefault(gpu if gpu is not None else _gpu_of(d), []).append(d)
    rules = []
    for key in sorted(open_map, key=str):
        try:
            gpu = int(key)
        except (TypeError, ValueError):
            gpu = None
        if gpu not in by_gpu:
            raise GpuOpsError("open: GPU %r has no devices in pool %s; GPUs: %s"
                              % (key, pool, ", ".join(str(g) for g in sorted(by_gpu))))
        mig = dict(((dd["attributes"]["profile"]["string"], int(dd["name"].rsplit("-", 1)[1])), dd["name"])
                   for dd in by_gpu[gpu] if "profile" in dd.get("attributes", {}))
        entries = open_map[key] or []
        if not isinstance(entries, list):
            raise GpuOpsError("open[%s] must be a list of {profile, start}" % key)
        keep = set()
        for e in entries:
            if not isinstance(e, dict) or set(e) - {"profile", "start"} or "profile" not in e:
                raise GpuOpsError("open[%s]: each entry is {profile, start}, got %r" % (key, e))
            want = (gpu_catalog.canonical_profile_name(e["profile"]), int(e.get("start", 0)))
            if want not in mig:
                valid = ", ".join("%s@%d" % k for k in sorted(mig))
                raise GpuOpsError("open[%s]: %s at start %d is no device of GPU %s in pool %s; valid: %s"
                                  % (key, want[0], want[1], key, pool, valid))
            keep.add(mig[want])
        for d in sorted(by_gpu[gpu], key=lambda x: x["name"]):
            if d["name"] in keep:
                continue
            name = "gpuops-steer-%s-%s" % (pool, d["name"])
            rules.append({"apiVersion": gpu_dra.DRA_API, "kind": "DeviceTaintRule",
                          "metadata": {"name": name[:253].rstrip("-."),
                                       "labels": {"app.kubernetes.io/managed-by": "gpuops.k8s",
                                                  "gpuops.k8s/pool": pool[:63].rstrip("-._")}},
                          "spec": {"deviceSelector": {"driver": driver, "pool": pool, "device": d["name"]},
                                   "taint": {"key": STEERING_TAINT_KEY, "value": "closed", "effect": effect}}})
    return rules
