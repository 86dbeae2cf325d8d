# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG layouts for the what-if replay: ``sharing: mig`` (a static ``mig_config`` per GPU model) and
``sharing: planned`` (per-node layouts of a gpu_plan result).

Every GPU becomes a list of *units*, what the device plugin would advertise on it (mixed strategy):

* a GPU with MIG disabled is one whole-GPU unit (``nvidia.com/gpu``);
* a MIG GPU gives one unit per GPU instance with a single compute instance; a full-size instance
  (7g.80gb on an A100-80GB) counts as a whole-GPU unit; a GPU instance split into several compute
  instances is not advertised by the device plugin, so it gives no unit (its slices are lost).

A pod asks for ``num_gpu`` units of one kind, chosen per GPU model: a whole-GPU pod (gpu_milli 1000)
asks for whole-GPU units; a sharing pod (gpu_milli < 1000) for the smallest MIG profile present on
that model's GPUs whose compute share *and* memory share are both at least gpu_milli / 1000
(fewest compute slices, then fewest memory slices), or a whole GPU when no profile is large enough.
A unit's size is its compute share (1g on a 7-slice GPU: 1000/7 milli); that is what the pod is
counted to hold.

MIG geometry: a model of the catalog that supports MIG uses its own profiles; any other model (the
trace's P100, T4, V100, A10, G1-G3: none can do MIG) is treated as a GPU shaped like ``mig_shape``
(default ``a100_80gb``): an explicit "what if these GPUs were MIG GPUs" assumption.

``mig_config``: ``{model: layout}``, ``*`` for every model without an entry of its own; a layout is
``{profile: count}`` (every GPU of the model), ``all-balanced``, ``all-<profile>`` (as many as fit),
``all-disabled``, or a list of mig-parted v1 entries (``devices``, ``mig-enabled``,
``mig-devices``) walked over each node's GPUs. A model that no node has is an error (a typo would
otherwise change nothing). Given as a file path, errors name the file, line and column.

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.whatif import trace_models

MILLI = 1000
DEFAULT_SHAPE = "a100_80gb"
WHOLE = 0  # unit kind index of a whole GPU

# A unit kind: shape (catalog key) and GI profile name; whole GPU: (None, "gpu").
if TYPE_CHECKING:
    from ansible_collections.gpuops.k8s.plugins.module_utils.whatif.data import Node

# Per node, per GPU, the unit kinds (indices into UnitTable.kinds) the GPU gives.
Layouts = List[List[List[int]]]
# Where a pod's units are (SliceReplay.last_gpus): (unit kind, or None for a pod without GPUs; GPU index per unit).
UnitGpus = Tuple[Optional[int], List[int]]

UnitKind = namedtuple("UnitKind", ["shape", "profile", "compute_slices", "memory_slices", "compute_frac", "memory_frac", "size_milli"])


def shape_of(model: Optional[str], mig_shape: str = DEFAULT_SHAPE) -> gpu_catalog.GpuModel:
    """The catalog model whose MIG geometry ``model``'s GPUs get."""
    known = trace_models.catalog_model(model) if model else None
    if known is not None and known.profiles:
        return known
    shape = gpu_catalog.CATALOG.get(mig_shape)
    if shape is None or not shape.profiles:
        valid = [k for k, m in sorted(gpu_catalog.CATALOG.items()) if m.profiles]
        raise GpuOpsError("mig_shape %r is not a MIG-capable catalog model; valid: %s" % (mig_shape, ", ".join(valid)),
                          valid_shapes=valid)
    return shape


class UnitTable(object):
    """The unit kinds of a replay; index 0 is the whole GPU."""

    def __init__(self) -> None:
        self.kinds = [UnitKind(None, "gpu", 0, 0, 1.0, 1.0, float(MILLI))]
        self._index: Dict[Tuple[Optional[str], str], int] = {(None, "gpu"): WHOLE}

    def kind(self, shape: gpu_catalog.GpuModel, profile: gpu_catalog.GiProfile) -> int:
        key = (shape.key, profile.name)
        if profile.compute_slices >= shape.compute_slices:
            return WHOLE
        i = self._index.get(key)
        if i is None:
            cf = profile.compute_slices / float(shape.compute_slices)
            mf = profile.memory_slices / float(shape.memory_slices)
            i = len(self.kinds)
            self.kinds.append(UnitKind(shape.key, profile.name, profile.compute_slices, profile.memory_slices, cf, mf, cf * MILLI))
            self._index[key] = i
        return i

    def name(self, i: int) -> str:
        k = self.kinds[i]
        return k.profile if k.shape is None else k.profile


def load_mig_config(value: Any) -> Tuple[Dict[Any, Any], Callable[..., Where]]:
    """``(mapping, where_of)``: the mig_config mapping and a function key -> Where."""
    if isinstance(value, str):
        data, marks = mig_config.load_config_text(mig_config.read_config_text(value, "the MIG config file"), value, marks=True)
        if not isinstance(data, dict) or not data:
            Where(value, 1, 1).fail("a mig_config file must be a mapping {model: layout}")

        def where(key, part="key"):
            mk = marks.get(key if part == "key" else (key, "value"))
            if mk:
                return Where(value, mk[0], mk[1])
            return Where(value, path="mig_config.%s" % key)
        return data, where
    if not isinstance(value, dict) or not value:
        raise GpuOpsError("mig_config must be a mapping {model: layout} or the path of a YAML file holding one")
    return value, (lambda key, part="key": Where("mig_config", path="mig_config.%s" % key))


def _gpu_layouts_for(layout, shape, ngpu, where):
    """Per-GPU ``mig_devices`` dict (None: MIG disabled) for ``ngpu`` GPUs from one layout form."""
    if isinstance(layout, str):
        text = layout.strip()
        if text == "all-disabled":
            return [None] * ngpu
        if text == "all-balanced":
            if not shape.all_balanced:
                where.fail("%s has no all-balanced layout" % shape.key)
            return [dict(shape.all_balanced)] * ngpu
        if text.startswith("all-"):
            name = text[4:]
            try:
                p = mig_plan.find_profile(shape.profiles, name, label=shape.key)
            except GpuOpsError as e:
                where.fail(e.msg)
            return [{p.name: p.max_instances}] * ngpu
        where.fail("unknown layout %r; use all-balanced, all-<profile>, all-disabled, {profile: count} or mig-parted "
                   "entries" % layout)
    if isinstance(layout, dict):
        return [dict(layout)] * ngpu
    if isinstance(layout, list):
        try:
            entries = mig_config.parse_entries(layout, source=where.text())
        except GpuOpsError as e:
            where.fail(e.msg)
        gpus = [{"index": i, "mig_capable": True} for i in range(ngpu)]
        desired = mig_config.resolve(entries, gpus)
        out = []
        for i in range(ngpu):
            d = desired.get(i)
            out.append(dict(d.mig_devices) if d is not None and d.mig_enabled else None)
        return out
    where.fail("a layout must be a name (all-balanced), a mapping {profile: count} or a list of mig-parted entries, "
               "not %r" % (layout,))


def units_of_gpu(mig_devices: Optional[Mapping[str, Any]], shape: gpu_catalog.GpuModel, table: UnitTable, where: Where,
                 cache: Dict[Any, List[int]]) -> List[int]:
    """Unit kinds of one GPU from its ``mig_devices`` (None: MIG disabled)."""
    if mig_devices is None:
        return [WHOLE]
    key = (shape.key, tuple(sorted(mig_devices.items())))
    if key in cache:
        return cache[key]
    try:
        bad = [k for k, v in mig_devices.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
        if bad:
            raise GpuOpsError("count of %s must be an integer >= 0" % bad[0])
        targets = mig_plan.targets_from_mig_devices(mig_devices, shape.profiles, label=shape.key)
        mig_plan.validate_targets(targets, shape.profiles, label=shape.key)
    except GpuOpsError as e:
        where.fail("layout %s on %s: %s" % (_fmt(mig_devices), shape.key, e.msg))
    pmap = mig_plan.profile_map(shape.profiles)
    units = []
    for t in targets:
        if len(t.compute_instances) != 1:
            continue  # several compute instances in one GI: not advertised by the device plugin
        units.append(table.kind(shape, pmap[t.profile]))
    cache[key] = units
    return units


def _fmt(mig_devices):
    return "{%s}" % ", ".join("%s: %s" % (k, mig_devices[k]) for k in sorted(mig_devices))


def _node_layouts(nodes, gpu_units):
    """Per node its per-GPU unit lists: none without GPUs, ``gpu_units(node)``, or whole GPUs where that is None."""
    out = []
    for n in nodes:
        if not n.gpus:
            out.append([])
            continue
        units = gpu_units(n)
        out.append([[WHOLE] for dummy in range(n.gpus)] if units is None else units)
    return out


def static_layouts(nodes: Sequence[Node], mig_config: Any, mig_shape: str = DEFAULT_SHAPE,
                   table: Optional[UnitTable] = None) -> Tuple[UnitTable, Layouts]:
    """``(table, per-node list of per-GPU unit lists)`` for ``sharing: mig``."""
    table = table or UnitTable()
    data, where_of = load_mig_config(mig_config)
    models = sorted(set(n.model for n in nodes if n.model))
    for key in data:
        if key != "*" and str(key) not in models:
            where_of(key).fail("unknown model %s in mig_config; the cluster's GPU models are: %s (or * for all)"
                               % (key, ", ".join(models) or "none"), model=str(key), models=models)
    cache: Dict[Any, List[int]] = {}

    def gpu_units(n):
        key = n.model if n.model in data else ("*" if "*" in data else None)
        if key is None:
            return None
        shape = shape_of(n.model, mig_shape)
        where = where_of(key, "value")
        return [units_of_gpu(d, shape, table, where, cache) for d in _gpu_layouts_for(data[key], shape, n.gpus, where)]

    return table, _node_layouts(nodes, gpu_units)


def planned_layouts(nodes: Sequence[Node], plan: Any, mig_shape: str = DEFAULT_SHAPE,
                    table: Optional[UnitTable] = None) -> Tuple[UnitTable, Layouts]:
    """``(table, per-node unit lists)`` from a gpu_plan result (or its ``plan`` part)."""
    table = table or UnitTable()
    if not isinstance(plan, dict):
        raise GpuOpsError("plan must be the result of gpuops.k8s.gpu_plan (or its plan: mig_parted_config + node_configs)")
    if "plan" in plan and isinstance(plan["plan"], dict):
        plan = plan["plan"]
    spec = plan.get("mig_parted_config")
    configs_in = plan.get("node_configs")
    if not isinstance(spec, dict) or not isinstance(configs_in, list):
        raise GpuOpsError("plan needs mig_parted_config (a mig-parted v1 spec) and node_configs ([{node, mig_config}])",
                          keys=sorted(plan))
    configs = mig_config.parse_spec(spec, source="plan.mig_parted_config")
    by_name = dict((n.name, n) for n in nodes)
    chosen = {}
    for i, item in enumerate(configs_in):
        where = Where("plan", path="plan.node_configs[%d]" % i)
        if not isinstance(item, dict) or "node" not in item or "mig_config" not in item:
            where.fail("must be a mapping with node and mig_config")
        name = str(item["node"])
        if name not in by_name:
            where.fail("node %s is not in the replayed cluster" % name, node=name)
        if item["mig_config"] not in configs:
            where.fail("mig_config %r is not in plan.mig_parted_config; it has: %s"
                       % (item["mig_config"], ", ".join(sorted(configs))))
        chosen[name] = (item["mig_config"], where)
    cache: Dict[Any, List[int]] = {}

    def gpu_units(n):
        if n.name not in chosen:
            return None
        cfg, where = chosen[n.name]
        shape = shape_of(n.model, mig_shape)
        desired = mig_config.resolve(configs[cfg], [{"index": i, "mig_capable": True} for i in range(n.gpus)])
        per_gpu = []
        for i in range(n.gpus):
            d = desired.get(i)
            per_gpu.append(units_of_gpu(dict(d.mig_devices) if d is not None and d.mig_enabled else None,
                                        shape, table, where, cache))
        return per_gpu

    return table, _node_layouts(nodes, gpu_units)


def exclusive_layouts(nodes: Sequence[Node], table: Optional[UnitTable] = None) -> Tuple[UnitTable, Layouts]:
    """Every GPU one whole-GPU unit (``sharing: exclusive`` on the unit model)."""
    table = table or UnitTable()
    return table, [[[WHOLE] for dummy in range(n.gpus)] for n in nodes]


def request_kind(table: UnitTable, present: Iterable[int], milli: int) -> int:
    """Unit kind a request of ``milli`` per GPU asks for, given the kinds ``present`` on a model."""
    if milli >= MILLI:
        return WHOLE
    need = milli / float(MILLI)
    best = None
    for i in present:
        if i == WHOLE:
            continue
        k = table.kinds[i]
        if k.compute_frac + 1e-12 >= need and k.memory_frac + 1e-12 >= need:
            key = (k.compute_slices, k.memory_slices, k.profile)
            if best is None or key < best[0]:
                best = (key, i)
    return best[1] if best else WHOLE
