# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig-parted v1 config files and inline layouts -> desired MIG state per GPU.

A file that ``nvidia-mig-parted`` accepts is accepted here unchanged, with the same validation
rules (api/spec/v1 of mig-parted):

* ``version`` is required and must be ``v1``; unknown top-level or per-entry keys are errors;
* ``mig-configs`` maps config names to a non-empty list of entries;
* an entry has ``devices`` (the literal ``all`` or a list of GPU indexes; a bare int is rejected),
  ``mig-enabled`` (bool, required), ``mig-devices`` (required when ``mig-enabled`` is true, may be
  ``{}``; must be empty or absent when it is false) and an optional ``device-filter`` (one string or
  a list, each ``0xDDDDVVVV`` with an optional ``:0xSSSSVVVV`` subsystem part);
* counts are integers >= 0 and a non-empty ``mig-devices`` whose counts are all 0 is rejected;
* profile keys follow ``[<C>c.]<G>g.<GB>gb[+attr[,attr]]`` or ``...-me``.

Walk semantics (as mig-parted): entries apply in order to the GPUs their ``devices`` and
``device-filter`` match; a GPU matched by several entries ends in the state of the last one; a GPU
that no entry matches is left exactly as it is. A GPU that cannot do MIG is skipped under
``devices: all`` and under ``mig-enabled: false``; listing it explicitly with ``mig-enabled: true``
is an error.

Pure Python, no NVML, Python 3.9 compatible.
"""

from __future__ import annotations

import io
import re
from collections import namedtuple
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.common.where import Where
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

SPEC_VERSION = "v1"
TOP_KEYS = ("version", "mig-configs")
ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")

# One parsed entry of a config: ``devices`` is "all" or a tuple of ints; ``device_filter`` a tuple
# of DeviceId (empty = every GPU); ``mig_devices`` a dict profile -> count (profiles as written).
MigConfigEntry = namedtuple("MigConfigEntry", ["devices", "device_filter", "mig_enabled", "mig_devices"])

# A PCI id filter: device/vendor and optionally subsystem device/vendor (None when absent).
DeviceId = namedtuple("DeviceId", ["device", "vendor", "subsystem_device", "subsystem_vendor", "text"])

# Desired state of one GPU after walking the config; ``entry`` is the index of the last entry that
# matched it.
GpuDesired = namedtuple("GpuDesired", ["mig_enabled", "mig_devices", "entry"])

# mig-parted's profile grammar (go-nvlib parseMigProfile): '+' attributes or one '-me', never both.
_STRICT_PROFILE_RE = re.compile(
    r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+(?:me|me\.all|gfx)(?:,(?:me|me\.all|gfx))*|-me)?$"
)


def _import_yaml():
    """PyYAML, imported on first use: a mig_partition run given a layout (as roles/mig calls it) never
    parses YAML, and importing PyYAML costs about 20 ms on every host."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
        raise GpuOpsError("PyYAML is required to read mig-parted config files (python3-pyyaml)") from None
    return yaml


def _unique_key_loader(yaml):
    """A SafeLoader that refuses duplicate mapping keys, as mig-parted's Go YAML parser does."""

    class UniqueKeyLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
        pass

    def construct_mapping(loader, node, deep=False):
        loader.flatten_mapping(node)
        seen = {}
        for key_node, dummy in node.value:
            key = loader.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # unhashable key: let PyYAML report it
                continue
            if first is not None:
                raise GpuOpsError("duplicate key %r at line %d, column %d (first at line %d); mig-parted refuses "
                                  "duplicate keys" % (key, key_node.start_mark.line + 1, key_node.start_mark.column + 1,
                                                      first.start_mark.line + 1),
                                  duplicate_key=str(key), line=key_node.start_mark.line + 1)
            seen[key] = key_node
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return UniqueKeyLoader


def load_config_text(text: str, source: str = "config", marks: bool = False) -> Any:
    """Parse YAML or JSON text into Python data (no validation); duplicate mapping keys are refused and a syntax
    error names its line and column. With ``marks``: ``(data, marks)``, marks the positions (line, column) of the
    top-level keys - ``{key: (line, column)}`` - and of their values - ``{(key, "value"): (line, column)}``."""
    yaml = _import_yaml()
    try:
        data = yaml.load(text, Loader=_unique_key_loader(yaml))  # nosec B506 - a SafeLoader subclass
        node = yaml.compose(text) if marks else None
    except GpuOpsError as e:
        raise GpuOpsError("%s: %s" % (source, e.msg), **e.details)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        if mark is not None:
            raise GpuOpsError("%s, line %d, column %d: not valid YAML: %s"
                              % (source, mark.line + 1, mark.column + 1, getattr(e, "problem", e)),
                              source=source, line=mark.line + 1, column=mark.column + 1)
        raise GpuOpsError("%s is not valid YAML: %s" % (source, e), source=source)
    if not marks:
        return data
    found = {}
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            found[k.value] = (k.start_mark.line + 1, k.start_mark.column + 1)
            found[(k.value, "value")] = (v.start_mark.line + 1, v.start_mark.column + 1)
    return data, found


def read_config_text(path: str, what: str = "MIG config file") -> str:
    """The UTF-8 text of a YAML/JSON file, with errors that name the file."""
    try:
        with io.open(path, "rb") as f:
            raw = f.read()
    except (IOError, OSError) as e:
        raise GpuOpsError("cannot read %s %s: %s" % (what, path, e), source=path, path=path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GpuOpsError("%s %s is not UTF-8 text (byte 0x%02x at offset %d); a mig-parted config is "
                          "YAML or JSON in UTF-8" % (what, path, raw[e.start], e.start), source=path, path=path)


def load_config_file(path: str) -> Dict[str, Any]:
    """Read and validate a mig-parted config file; returns {name: [MigConfigEntry]}."""
    return parse_spec(load_config_text(read_config_text(path), path), source=path)


def parse_spec(data: Dict[str, Any], source: str = "config") -> Dict[str, Any]:
    """Validate a whole mig-parted v1 spec; returns an ordered dict name -> [MigConfigEntry]."""
    if not isinstance(data, dict):
        raise GpuOpsError("%s: a mig-parted config must be a mapping with 'version' and 'mig-configs'" % source)
    if "version" not in data:
        raise GpuOpsError("%s: unable to parse with missing 'version' field (expected version: v1)" % source)
    if data["version"] != SPEC_VERSION:
        raise GpuOpsError("%s: unknown version %r; the only valid version is v1" % (source, data["version"]))
    for key in data:
        if key not in TOP_KEYS:
            raise GpuOpsError("%s: unexpected field %r; valid top-level fields: %s" % (source, key, ", ".join(TOP_KEYS)))
    configs = data.get("mig-configs")
    if configs is None:
        raise GpuOpsError("%s: missing 'mig-configs' field" % source)
    if not isinstance(configs, dict) or not configs:
        raise GpuOpsError("%s: 'mig-configs' must be a mapping with at least one config" % source)
    out = {}
    for name, entries in configs.items():
        out[str(name)] = parse_entries(entries, path=["mig-configs[%s]" % name], source=source)
    return out


def parse_entries(entries: Any, path: Optional[List[str]] = None, source: str = "layout") -> List[Any]:
    """Validate a list of config entries (one config of a file, or an inline ``layout``)."""
    path = path or []
    where = Where(source, path="".join(path)).named()
    if not isinstance(entries, list) or not entries:
        raise GpuOpsError("%s must be a non-empty list of entries (devices, mig-enabled, mig-devices)" % where)
    return [parse_entry(e, path + ["[%d]" % i], source) for i, e in enumerate(entries)]


def parse_entry(entry: Dict[str, Any], path: List[str], source: str = "layout") -> Any:
    where = Where(source, path="".join(path) or "config").named()
    if not isinstance(entry, dict):
        raise GpuOpsError("%s must be a mapping with devices, mig-enabled and mig-devices" % where)
    for key in entry:
        if key not in ENTRY_KEYS:
            raise GpuOpsError("%s: unexpected field %r; valid fields: %s" % (where, key, ", ".join(ENTRY_KEYS)))
    if "devices" not in entry:
        raise GpuOpsError("%s: missing 'devices' field (use 'all' or a list of GPU indexes)" % where)
    devices = _parse_devices(entry["devices"], where)
    if "mig-enabled" not in entry:
        raise GpuOpsError("%s: missing 'mig-enabled' field (true or false)" % where)
    enabled = entry["mig-enabled"]
    if not isinstance(enabled, bool):
        raise GpuOpsError("%s: mig-enabled must be true or false, not %r" % (where, enabled))
    mig_devices = entry.get("mig-devices")
    if enabled:
        if mig_devices is None:
            raise GpuOpsError("%s: mig-devices is required when mig-enabled is true ({} means MIG on, no instances)" % where)
    elif mig_devices:
        raise GpuOpsError("%s: mig-devices must be empty or absent when mig-enabled is false" % where)
    mig_devices = _parse_mig_devices(mig_devices or {}, where)
    filters = _parse_filters(entry.get("device-filter"), where)
    return MigConfigEntry(devices, filters, enabled, mig_devices)


def _parse_devices(value, where):
    if isinstance(value, str):
        if value == "all":
            return "all"
        raise GpuOpsError("%s: devices must be 'all' or a list of GPU indexes, not %r" % (where, value))
    if isinstance(value, list):
        out = []
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise GpuOpsError("%s: devices must list GPU indexes (integers >= 0), not %r" % (where, v))
            out.append(v)
        return tuple(out)
    # a bare int (devices: 7) is rejected by mig-parted too (mig-parted#44)
    raise GpuOpsError("%s: devices must be 'all' or a list of GPU indexes such as [0, 3], not %r" % (where, value))


def _parse_mig_devices(value, where):
    if not isinstance(value, dict):
        raise GpuOpsError("%s: mig-devices must be a mapping profile -> count, not %r" % (where, value))
    out = {}
    for key, count in value.items():
        name = str(key).strip()
        if not _STRICT_PROFILE_RE.match(name):
            raise GpuOpsError(
                "%s: invalid MIG profile %r in mig-devices; expected [<C>c.]<G>g.<GB>gb[+me|+me.all|+gfx|-me] "
                "such as 1g.10gb, 1g.10gb+me or 1c.3g.40gb" % (where, key))
        if isinstance(count, bool) or not isinstance(count, int):
            raise GpuOpsError("%s: count of %s must be an integer, not %r" % (where, name, count))
        if count < 0:
            raise GpuOpsError("%s: count of %s must be >= 0, not %d" % (where, name, count))
        out[name] = count
    if out and not any(out.values()):
        raise GpuOpsError("%s: mig-devices lists profiles but every count is 0; use {} for MIG on with no instances" % where)
    return out


def parse_device_id(text: str, where: str = "device-filter") -> Any:
    """``0xDDDDVVVV`` or ``0xDDDDVVVV:0xSSSSVVVV`` (base auto-detected, as Go's ParseUint(s, 0, 32))."""
    parts = str(text).strip().split(":")
    if len(parts) not in (1, 2):
        raise GpuOpsError("%s: invalid device-filter %r; expected 0xDDDDVVVV or 0xDDDDVVVV:0xSSSSVVVV" % (where, text))
    values = []
    for part in parts:
        try:
            v = int(part.strip(), 0)
        except ValueError:
            raise GpuOpsError("%s: invalid device-filter %r; expected 0xDDDDVVVV (PCI device id and vendor id, "
                              "e.g. 0x20B210DE) with an optional :0xSSSSVVVV subsystem part" % (where, text))
        if v < 0 or v > 0xFFFFFFFF:
            raise GpuOpsError("%s: device-filter %r is not a 32-bit id" % (where, text))
        values.append(v)
    dev = values[0]
    if len(values) == 2:
        sub = values[1]
        return DeviceId(dev >> 16, dev & 0xFFFF, sub >> 16, sub & 0xFFFF, str(text).strip())
    return DeviceId(dev >> 16, dev & 0xFFFF, None, None, str(text).strip())


def _parse_filters(value, where):
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise GpuOpsError("%s: device-filter must be a string or a list of strings, not %r" % (where, value))
    for v in value:
        if not isinstance(v, str):
            raise GpuOpsError("%s: device-filter entries must be strings such as \"0x20B210DE\", not %r" % (where, v))
    return tuple(parse_device_id(v, where) for v in value)


def select_config(configs: Dict[str, Any], name: Optional[str] = None, source: str = "config") -> List[Any]:
    """The entries of config ``name``; the only config when ``name`` is None and there is one."""
    names = sorted(configs)
    if name is None:
        if len(configs) == 1:
            return configs[names[0]]
        raise GpuOpsError("%s holds %d configs; choose one with config: %s" % (source, len(configs), ", ".join(names)),
                          valid_configs=names)
    if name not in configs:
        raise GpuOpsError("config %r is not in %s; valid configs: %s" % (name, source, ", ".join(names)),
                          valid_configs=names)
    return configs[name]


def _int_id(value):
    if value is None:
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value), 0)
    except ValueError:
        return None


def gpu_pci_ids(gpu: Dict[str, Any]) -> Tuple[Any, ...]:
    """(device, vendor, subsystem device, subsystem vendor) of a gpu facts dict; unknown parts None.

    ``pci_device_id`` may be "0x2330" or the packed "0x233010DE"; ``pci_subsystem_id`` (optional)
    is the packed ``0xSSSSVVVV`` value NVML reports as pciSubSystemId.
    """
    dev = _int_id(gpu.get("pci_device_id"))
    vendor = gpu_catalog.NVIDIA_VENDOR_ID
    if dev is not None and dev > 0xFFFF:
        dev, vendor = dev >> 16, dev & 0xFFFF
    sub = _int_id(gpu.get("pci_subsystem_id"))
    if sub is None:
        return dev, vendor, None, None
    return dev, vendor, sub >> 16, sub & 0xFFFF


def filter_matches(device_filter: Tuple[Any, ...], gpu: Dict[str, Any]) -> bool:
    """True when the GPU matches one of the filters (or there is no filter)."""
    if not device_filter:
        return True
    dev, vendor, sdev, svendor = gpu_pci_ids(gpu)
    for f in device_filter:
        if f.device != dev or f.vendor != vendor:
            continue
        if f.subsystem_device is not None and (f.subsystem_device != sdev or f.subsystem_vendor != svendor):
            continue
        return True
    return False


def entry_matches(entry: Any, gpu: Dict[str, Any]) -> bool:
    if entry.devices != "all" and gpu["index"] not in entry.devices:
        return False
    return filter_matches(entry.device_filter, gpu)


def gpus_present_text(gpus: List[Dict[str, Any]]) -> str:
    return ", ".join("%s (%s)" % (g["index"], g.get("model") or g.get("name") or "unknown model") for g in gpus) or "none"


def absent_indexes(entries: List[Any], gpus: List[Dict[str, Any]]) -> List[int]:
    """GPU indexes the entries list explicitly that the host does not have (sorted)."""
    present = set(g["index"] for g in gpus)
    named = set()
    for entry in entries:
        if entry.devices != "all":
            named.update(entry.devices)
    return sorted(named - present)


def check_absent(entries: List[Any], gpus: List[Dict[str, Any]], strict: bool,
                 warnings: Optional[List[Any]] = None) -> List[int]:
    """Indexes named but absent. ``strict`` (an inline layout): GpuOpsError naming the GPUs present.
    Otherwise (a config file: mig-parted's walker skips them, so a fleet-wide file works on smaller
    hosts) one warning is appended to ``warnings``."""
    absent = absent_indexes(entries, gpus)
    if not absent:
        return absent
    listed = ", ".join(str(i) for i in absent)
    present = gpus_present_text(gpus)
    if strict:
        raise GpuOpsError("layout names GPU %s, which this host does not have; GPUs present: %s; nothing was changed"
                          % (listed, present), absent_gpus=absent, gpus_present=[g["index"] for g in gpus],
                          changed=False)
    if warnings is not None:
        warnings.append("the MIG config names GPU %s, which this host does not have; skipped (as mig-parted does); "
                        "GPUs present: %s" % (listed, present))
    return absent


def resolve(entries: List[Any], gpus: List[Dict[str, Any]], skipped: Optional[List[Any]] = None) -> Dict[Any, Any]:
    """Walk ``entries`` over ``gpus`` (gpu facts dicts) -> {index: GpuDesired} for matched GPUs.

    GPUs that no entry matches are absent (left as they are). Matched GPUs that cannot be
    partitioned (no MIG support, or lost) are appended to ``skipped`` (when given) with the reason.
    Raises GpuOpsError when such a GPU is listed explicitly with mig-enabled true. Indexes the
    host does not have match nothing (see check_absent).
    """
    out = {}
    errors = []
    skips = {}
    for i, entry in enumerate(entries):
        for gpu in gpus:
            if not entry_matches(entry, gpu):
                continue
            reason = None
            if gpu.get("lost"):
                reason = "GPU is lost (fell off the bus)"
            elif not gpu.get("mig_capable"):
                reason = "MIG not supported"
            if reason:
                if entry.mig_enabled and entry.devices != "all":
                    errors.append("GPU %d (%s) cannot be partitioned (%s) but entry %d lists it with mig-enabled: true"
                                  % (gpu["index"], gpu.get("name") or gpu.get("model") or "unknown", reason, i))
                skips[gpu["index"]] = {"index": gpu["index"], "uuid": gpu.get("uuid"), "name": gpu.get("name"),
                                       "reason": reason}
                continue
            out[gpu["index"]] = GpuDesired(entry.mig_enabled, dict(entry.mig_devices), i)
    if errors:
        raise GpuOpsError("; ".join(errors), errors=errors)
    if skipped is not None:
        skipped.extend(skips[k] for k in sorted(skips))
    return out


def entries_from_params(params: Dict[str, Any]) -> List[Any]:
    """The config entries selected by the mig_partition module's options."""
    layout = params.get("layout")
    config_file = params.get("config_file")
    if layout is not None and config_file:
        raise GpuOpsError("config_file and layout are mutually exclusive")
    if layout is not None:
        if params.get("config"):
            raise GpuOpsError("config selects a config of config_file; it cannot be used with layout")
        return parse_entries(layout, source="layout")
    if config_file:
        configs = load_config_file(config_file)
        return select_config(configs, params.get("config"), source=config_file)
    raise GpuOpsError("one of config_file (with config) or layout is required")
