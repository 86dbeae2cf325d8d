# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's typed API: what goes in (:class:`PlanRequest`) and what comes out (:class:`PlanResult`).

* :class:`Node` - one node: its GPU models by index, labels, the current layout per GPU, its mig.config name and
  how many GPU pods run on it;
* :class:`Item` - one demand item (validated: numbers are numbers, kind and isolation valid);
* :class:`PlanOptions` - objective, solver, disruption budget, time limit, LP bound and LP rounding;
* :class:`PlanRequest` - nodes, items, the price table and the options: the one argument of ``solver.plan``;
* :class:`PlanResult` - every output of a plan as typed fields; :meth:`PlanResult.as_dict` is the module's
  documented ``plan`` return value, :attr:`PlanResult.layouts` the layout per GPU the plan wants and
  :attr:`PlanResult.planned_gpus` the instance facts the report draws.

``demand.parse_request`` turns gpu_plan's parameters (a dict) into a :class:`PlanRequest` once, at the edge;
callers inside the collection (the what-if's re-plans) build the request directly.

Pure Python, Python 3.9 compatible; imports nothing of the collection but catalog/ and common/ (a leaf of the planner).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

# A GPU's MIG layout: WHOLE (MIG disabled, or no MIG) or a sorted tuple of (profile name, count).
Layout = Tuple[Tuple[str, int], ...]
WHOLE: Layout = ()
# USD per GPU-hour per catalog key (None: no price known)
Prices = Dict[str, Optional[float]]

OBJECTIVES = ("min_cost", "min_gpus")
SOLVERS = ("auto", "exact", "heuristic")


def check_choice(name: str, value: Any, valid: Sequence[str]) -> str:
    """``value`` when it is one of ``valid``; else an error that names them."""
    if value not in valid:
        raise GpuOpsError("%s %r is not valid; valid %ss: %s" % (name, value, name, ", ".join(valid)))
    return value


def fleet_models(nodes: Iterable[Node]) -> Dict[str, gpu_catalog.GpuModel]:
    """The fleet's GPU models by catalog key, in the order the nodes list them first (the one list of them)."""
    models: Dict[str, gpu_catalog.GpuModel] = OrderedDict()
    for n in nodes:
        for m in n.models:
            models.setdefault(m.key, m)
    return models


@dataclass(frozen=True)
class Node:
    """One node. ``models``: the catalog model of each GPU by index; ``current``: each GPU's layout today (None:
    unknown); ``current_name``: its mig.config name when one was given; ``busy``: GPU pods running on it (on equal
    cost a plan keeps busy nodes' layouts and changes idle nodes first)."""

    name: str
    models: Tuple[gpu_catalog.GpuModel, ...]
    labels: Dict[str, str] = field(default_factory=dict)
    current: Tuple[Optional[Layout], ...] = ()
    current_name: Optional[str] = None
    busy: int = 0

    def __post_init__(self) -> None:
        """No ``current``: every GPU's layout is unknown; else one layout (or None) per GPU."""
        if not self.current and self.models:
            object.__setattr__(self, "current", (None,) * len(self.models))
        elif len(self.current) != len(self.models):
            raise GpuOpsError("node %s: current needs one layout per GPU (%d), got %d"
                              % (self.name, len(self.models), len(self.current)))


@dataclass(frozen=True)
class Item:
    """One demand item; ``index`` its position in the demand (the key of every per-item table).

    ``resource``: the extended resource the item's pods already request (pending pods), or None; the plan then
    serves the item only on models where its option gives that resource."""

    index: int
    tenant: str
    name: str
    replicas: int
    memory_gb: float
    compute: Optional[float]
    kind: str
    isolation: str
    priority: int = 0
    gpus_per_replica: int = 1
    resource: Optional[str] = None


@dataclass(frozen=True)
class PlanOptions:
    """How to plan (gpu_plan's options of the same names; the defaults are the module's)."""

    objective: str = "min_cost"
    solver: str = "auto"
    disruption_budget: Optional[int] = None
    time_limit_s: float = 60.0
    bound: bool = True
    lp_rounding: bool = True

    def __post_init__(self) -> None:
        """Checks every option (the errors name the valid values) and stores budget and time limit as numbers."""
        check_choice("objective", self.objective, OBJECTIVES)
        check_choice("solver", self.solver, SOLVERS)
        if self.disruption_budget is not None:
            object.__setattr__(self, "disruption_budget",
                               validation.number(self.disruption_budget, "disruption_budget", 0, integer=True))
        object.__setattr__(self, "time_limit_s",
                           float(validation.number(self.time_limit_s, "time_limit_s", 0, strict_min=True)))
        object.__setattr__(self, "bound", bool(self.bound))
        object.__setattr__(self, "lp_rounding", bool(self.lp_rounding))


@dataclass(frozen=True)
class PlanRequest:
    """One planning problem. ``prices``: USD per GPU-hour per catalog key (None: the catalog's list prices)."""

    nodes: List[Node]
    items: List[Item]
    options: PlanOptions = field(default_factory=PlanOptions)
    prices: Optional[Dict[str, Optional[float]]] = None

    def price_table(self) -> Dict[str, Optional[float]]:
        """``prices``, or the catalog's list prices when none were given."""
        return gpu_catalog.default_prices() if self.prices is None else self.prices


@dataclass
class PlanResult:
    """A plan. The first nine fields are gpu_plan's ``plan`` return value (docs/planning.md, Outputs);
    ``layouts``: per node name, the layout each GPU gets (None: not MIG-capable, or left as it is and unknown);
    ``planned_gpus``: per node drawn in the report (one per distinct configuration, at most 12), its GPUs'
    instance facts (gpu_info's shape)."""

    summary: Dict[str, Any]
    decisions: List[Dict[str, Any]]
    placements: List[Dict[str, Any]]
    unplaced: List[Dict[str, Any]]
    mig_parted_config: Dict[str, Any]
    node_configs: List[Dict[str, Any]]
    device_plugin_configs: Dict[str, Any]
    quotas: Dict[str, Any]
    prices: Dict[str, Optional[float]]
    layouts: Dict[str, List[Optional[Layout]]] = field(default_factory=OrderedDict)
    planned_gpus: Dict[str, List[Dict[str, Any]]] = field(default_factory=OrderedDict)

    def as_dict(self) -> Dict[str, Any]:
        """gpu_plan's ``plan`` return value (the documented keys, in their order)."""
        return {
            "summary": self.summary,
            "decisions": self.decisions,
            "placements": self.placements,
            "unplaced": self.unplaced,
            "mig_parted_config": self.mig_parted_config,
            "node_configs": self.node_configs,
            "device_plugin_configs": self.device_plugin_configs,
            "quotas": self.quotas,
            "prices": self.prices,
        }
