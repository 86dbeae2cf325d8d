# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inputs of the what-if engine: nodes and pods, from openb CSV files or from lists.

* ``read_nodes_csv`` / ``read_pods_csv``: the schema of the Alibaba GPU trace 2023 (openb), as the
  FGD artefact reads it (nodes: ``sn, cpu_milli, memory_mib, gpu, model``; pods: ``name, cpu_milli,
  memory_mib, num_gpu, gpu_milli[, gpu_spec, qos, pod_phase, creation_time, ...]``). Every error
  names the file, the line and the column (``pods.csv, line 12, column 5 (gpu_milli): ...``).
* ``nodes_from_list``: gpu_plan's node list (``[{name, gpus: [{model, count}], cpu_milli?,
  memory_mib?, pods?, labels?}]``) or the host vars of the ``gpuops.k8s.gpu_nodes`` inventory
  plugin (``gpuops_k8s_node_name``, ``gpu_product``, ``gpu_count``).
* ``pods_from_list``: pods as dicts with the CSV's keys; errors name ``pods[3].gpu_milli``.

Rules (the definitions of the trace's README and the artefact's converter): ``num_gpu`` is the
number of GPUs; ``gpu_milli`` is the share of *each* GPU in thousandths (1..1000); a pod with
``num_gpu`` 0 must have ``gpu_milli`` 0; a multi-GPU pod takes whole GPUs (``gpu_milli`` 1000).
``gpu_milli`` may be left out (a GPU pod then takes whole GPUs, as the artefact's converter does).
``gpu_spec`` lists the GPU models a pod accepts, ``|``-separated (empty: any model).

Pure Python, Python 3.9 compatible.
"""

from __future__ import annotations

import csv
import io
import math
from collections import namedtuple
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

MILLI = 1000

# cpu_milli / memory_mib / pods: None means "not limited" (a node list without CPU or memory facts).
Node = namedtuple("Node", ["name", "cpu_milli", "memory_mib", "gpus", "model", "pods", "labels"])
# gpu_spec: tuple of accepted models (empty tuple: any model); order: creation time (or row order).
# deletion_time / scheduled_time: seconds, as the trace gives them (None when absent); read for the
# replay with departures (departures.py), ignored by the FGD protocol.
Pod = namedtuple("Pod", ["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time", "qos",
                         "deletion_time", "scheduled_time"])
Pod.__new__.__defaults__ = (None, None)

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu")
POD_OPTIONAL = ("gpu_milli", "gpu_spec", "qos", "creation_time", "deletion_time", "scheduled_time")


def _fail(where, column, message):
    where.fail(message, column)


def _integer(where, column, value, minimum=0, required=True, default=None):
    """An integer cell: ``12000`` or ``12000.0``; empty -> ``default`` unless ``required``."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        if required:
            _fail(where, column, "a value is required")
        return default
    if isinstance(value, bool):
        _fail(where, column, "%r is not a number" % (value,))
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip()
        try:
            number = int(text)
        except ValueError:
            try:
                as_float = float(text)
            except ValueError:
                _fail(where, column, "%r is not a number" % (value,))
            if math.isnan(as_float) or math.isinf(as_float) or as_float != int(as_float):
                _fail(where, column, "%r is not a whole number" % (value,))
            number = int(as_float)
    if number < minimum:
        _fail(where, column, "%d is below the minimum %d" % (number, minimum))
    return number


def _number(where, column, value, default=None):
    """A number (int or float) or ``default`` when empty."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return default
    if isinstance(value, bool):
        _fail(where, column, "%r is not a number" % (value,))
    try:
        return float(value)
    except (TypeError, ValueError):
        _fail(where, column, "%r is not a number" % (value,))


def _spec(value):
    if value is None:
        return ()
    text = str(value).strip()
    if not text or text.lower() == "nan":
        return ()
    return tuple(sorted(set(x.strip() for x in text.split("|") if x.strip())))


def make_pod(where: Where, row: Mapping[str, Any], index: int) -> Pod:
    """A Pod from a mapping (a CSV row or a list item), validated."""
    name = row.get("name")
    name = str(name).strip() if name is not None and str(name).strip() else "pod-%05d" % index
    cpu = _integer(where, "cpu_milli", row.get("cpu_milli"))
    mem = _integer(where, "memory_mib", row.get("memory_mib"))
    num = _integer(where, "num_gpu", row.get("num_gpu"))
    milli = _integer(where, "gpu_milli", row.get("gpu_milli"), required=False, default=None)
    if milli is None:
        milli = MILLI if num > 0 else 0
    if milli > MILLI:
        _fail(where, "gpu_milli", "%d is above 1000 (gpu_milli is the share of one GPU in thousandths)" % milli)
    if num == 0 and milli > 0:
        _fail(where, "gpu_milli", "the pod requests no GPU (num_gpu 0) but gpu_milli %d; a CPU-only pod has gpu_milli 0" % milli)
    if num > 0 and milli == 0:
        _fail(where, "gpu_milli", "the pod requests %d GPU(s) but gpu_milli 0; use 1..1000 (1000: whole GPUs)" % num)
    if num > 1 and milli < MILLI:
        _fail(where, "gpu_milli", "a multi-GPU pod (num_gpu %d) takes whole GPUs: gpu_milli must be 1000, not %d" % (num, milli))
    created = _number(where, "creation_time", row.get("creation_time"))
    deleted = _number(where, "deletion_time", row.get("deletion_time"))
    scheduled = _number(where, "scheduled_time", row.get("scheduled_time"))
    if created is not None and deleted is not None and deleted < created:
        _fail(where, "deletion_time", "%g is before the creation_time %g" % (deleted, created))
    qos = row.get("qos")
    qos = str(qos).strip() if qos is not None and str(qos).strip() else None
    return Pod(name, cpu, mem, num, milli, _spec(row.get("gpu_spec")), created, qos, deleted, scheduled)


def make_node(where: Where, name: str, cpu: Optional[int], mem: Optional[int], gpus: int, model: Optional[str],
              pods: Optional[int] = None, labels: Optional[Dict[str, Any]] = None) -> Node:
    if gpus > 0 and not model:
        _fail(where, "model", "a node with %d GPU(s) needs a GPU model" % gpus)
    return Node(name, cpu, mem, gpus, model if gpus > 0 else None, pods, labels or {})


def _open_csv(path, what):
    try:
        with io.open(path, "r", newline="", encoding="utf-8") as f:
            text = f.read()
    except (IOError, OSError) as e:
        raise GpuOpsError("cannot read the %s CSV file %s: %s" % (what, path, e), source=path)
    except UnicodeDecodeError as e:
        raise GpuOpsError("%s: not a UTF-8 text file (%s)" % (path, e), source=path)
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise GpuOpsError("%s, line 1: the file is empty (a header line is required)" % path, source=path, line=1)
    except csv.Error as e:
        raise GpuOpsError("%s, line 1: %s" % (path, e), source=path, line=1)
    header = [h.strip() for h in header]
    return reader, header


def _check_columns(path, header, required, aliases=None):
    aliases = aliases or {}
    for column in required:
        if column in header or any(a in header for a in aliases.get(column, ())):
            continue
        raise GpuOpsError("%s, line 1: missing column %r (the header has: %s)" % (path, column, ", ".join(header) or "nothing"),
                          source=path, line=1, column_name=column)


def _rows(reader, header, path):
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                raise GpuOpsError("%s, line %d: %d fields, the header has %d" % (path, line, len(row), len(header)),
                                  source=path, line=line)
            yield line, dict(zip(header, row))
    except csv.Error as e:
        raise GpuOpsError("%s, line %d: %s" % (path, reader.line_num, e), source=path, line=reader.line_num)


def read_nodes_csv(path: str) -> List[Node]:
    """Nodes of an openb node list (``sn, cpu_milli, memory_mib, gpu, model``)."""
    reader, header = _open_csv(path, "nodes")
    _check_columns(path, header, NODE_COLUMNS, aliases={"sn": ("name",)})
    name_col = "sn" if "sn" in header else "name"
    source = path
    nodes = []
    seen = set()
    for line, row in _rows(reader, header, path):
        where = Where(source, line, header=header)
        name = (row.get(name_col) or "").strip()
        if not name:
            _fail(where, name_col, "a node name is required")
        if name in seen:
            _fail(where, name_col, "node %s is listed twice" % name)
        seen.add(name)
        cpu = _integer(where, "cpu_milli", row.get("cpu_milli"))
        mem = _integer(where, "memory_mib", row.get("memory_mib"))
        gpus = _integer(where, "gpu", row.get("gpu"))
        model = (row.get("model") or "").strip()
        if model.lower() == "nan":
            model = ""
        pods = _integer(where, "pods", row.get("pods"), required=False) if "pods" in header else None
        nodes.append(make_node(where, name, cpu, mem, gpus, model, pods))
    if not nodes:
        raise GpuOpsError("%s: no nodes (only a header)" % path, source=path)
    return nodes


def read_pods_csv(path: str) -> List[Pod]:
    """Pods of an openb pod list, in file order (``creation_time`` kept for ordering)."""
    reader, header = _open_csv(path, "pods")
    _check_columns(path, header, POD_COLUMNS)
    pods: List[Pod] = []
    for line, row in _rows(reader, header, path):
        pods.append(make_pod(Where(path, line, header=header), row, len(pods)))
    if not pods:
        raise GpuOpsError("%s: no pods (only a header)" % path, source=path)
    return pods


def pods_from_list(items: Any, source: str = "pods") -> List[Pod]:
    if not isinstance(items, list) or not items:
        raise GpuOpsError("%s must be a non-empty list of pods ({cpu_milli, memory_mib, num_gpu, gpu_milli, ...})" % source)
    pods = []
    for i, item in enumerate(items):
        where = Where("%s[%d]" % (source, i))
        if not isinstance(item, dict):
            raise GpuOpsError("%s[%d] must be a mapping, not %r" % (source, i, item), source=source, index=i)
        for key in POD_COLUMNS[1:]:
            if key not in item:
                _fail(where, key, "missing (a pod needs %s)" % ", ".join(POD_COLUMNS[1:]))
        pods.append(make_pod(where, item, i))
    return pods


def _quantity_milli_cpu(where, column, value):
    """``cpu`` as Kubernetes writes it (``96``, ``96000m``) -> milli-CPU."""
    text = str(value).strip()
    if text.endswith("m"):
        return _integer(where, column, text[:-1])
    number = _number(where, column, text)
    return int(round(number * 1000))


_MEM_UNITS = {"Ki": 1.0 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1024.0 ** 2, "K": 1000.0 / 1048576, "M": 1e6 / 1048576,
              "G": 1e9 / 1048576, "T": 1e12 / 1048576}


def _quantity_mib(where, column, value):
    """``memory`` as Kubernetes writes it (``768Gi``, ``805306368Ki``, bytes) -> MiB."""
    text = str(value).strip()
    for unit in sorted(_MEM_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            return int(_number(where, column, text[:-len(unit)]) * _MEM_UNITS[unit])
    return int(_number(where, column, text) / 1048576)


def _node_model(where, gpus_item):
    if not isinstance(gpus_item, list) or not gpus_item:
        _fail(where, "gpus", "must be a list of {model, count}")
    models = []
    count = 0
    for j, g in enumerate(gpus_item):
        if not isinstance(g, dict) or "model" not in g:
            _fail(where, "gpus", "item %d must be a mapping {model, count}" % j)
        n = _integer(where, "gpus", g.get("count", 1))
        if n:
            models.append(str(g["model"]))
            count += n
    models = sorted(set(models))
    if len(models) > 1:
        _fail(where, "gpus", "holds GPUs of several models (%s); the what-if engine models one GPU model per node "
                             "(as the trace and the scheduler's GPU model label do): list it as one node per model"
              % ", ".join(models))
    return (models[0] if models else None), count


def nodes_from_list(items: Any, source: str = "nodes") -> List[Node]:
    """Nodes of gpu_plan's node list or of gpu_nodes inventory host vars."""
    if not isinstance(items, list) or not items:
        raise GpuOpsError("%s must be a non-empty list of nodes ({name, gpus: [{model, count}], cpu_milli, memory_mib})"
                          % source)
    nodes = []
    seen = set()
    for i, item in enumerate(items):
        where = Where("%s[%d]" % (source, i))
        if not isinstance(item, dict):
            raise GpuOpsError("%s[%d] must be a mapping, not %r" % (source, i, item), source=source, index=i)
        name = item.get("name") or item.get("gpuops_k8s_node_name") or item.get("sn")
        if not name:
            _fail(where, "name", "a node name is required")
        name = str(name)
        if name in seen:
            _fail(where, "name", "node %s is listed twice" % name)
        seen.add(name)
        if "gpus" in item:
            model, count = _node_model(where, item["gpus"])
        elif "gpu_product" in item or "gpu_count" in item:
            count = _integer(where, "gpu_count", item.get("gpu_count") or 0)
            model = item.get("gpu_product")
            if model:
                known = gpu_catalog.lookup_model(str(model).replace("-", " ")) or gpu_catalog.lookup_model(str(model))
                model = known.key if known else str(model)
        else:
            count = _integer(where, "gpu", item.get("gpu", 0))
            model = item.get("model")
        if "cpu_milli" in item:
            cpu = _integer(where, "cpu_milli", item["cpu_milli"])
        elif "cpu" in item:
            cpu = _quantity_milli_cpu(where, "cpu", item["cpu"])
        else:
            cpu = None
        if "memory_mib" in item:
            mem = _integer(where, "memory_mib", item["memory_mib"])
        elif "memory" in item:
            mem = _quantity_mib(where, "memory", item["memory"])
        else:
            mem = None
        pods = _integer(where, "pods", item.get("pods"), required=False) if item.get("pods") is not None else None
        labels = item.get("labels") or item.get("node_labels") or {}
        nodes.append(make_node(where, name, cpu, mem, count, model, pods, labels))
    return nodes
