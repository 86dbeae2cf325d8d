# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd drop-in for the NVIDIA runtime (controller side; Python 3.11+ for tomllib).

containerd merges imported files plugin by plugin: a drop-in that names the CRI plugin REPLACES the
main file's whole CRI section (containerd 1.6/1.7 — Debian 12's config then loses its CNI bin_dir
and the runc runtime). So the drop-in carries the main file's CRI plugin section with the NVIDIA
runtime merged in, and stays correct when that section is empty.
"""

from __future__ import annotations

import copy
import json
import re

try:
    import tomllib
except ImportError:  # pragma: no cover - controller Python < 3.11
    tomllib = None

CRI_PLUGIN = {2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}


class ContainerdConfigError(Exception):
    pass


def config_version(containerd_version_output, main_config=None):
    """Config schema of this containerd: 3 for containerd 2.x, otherwise 2."""
    if main_config and isinstance(main_config.get("version"), int) and main_config["version"] >= 2:
        return main_config["version"]
    m = re.search(r"(?:^|\s)v?(\d+)\.(\d+)\.\d+", containerd_version_output or "")
    if m and int(m.group(1)) >= 2:
        return 3
    return 2


def parse(text):
    if tomllib is None:
        raise ContainerdConfigError("reading containerd's TOML needs Python 3.11+ on the controller")
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as e:
        raise ContainerdConfigError("containerd's main config is not valid TOML: %s" % e)


def _deep_merge(base, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def nvidia_dropin(main_config_text, containerd_version_output="", runtime_name="nvidia",
                  binary="/usr/bin/nvidia-container-runtime", default=False, systemd_cgroup=True,
                  cdi=False, cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"), cdi_runtime=True):
    """The drop-in's text: version, and the CRI plugin section with the NVIDIA runtime(s)."""
    main = parse(main_config_text)
    version = config_version(containerd_version_output, main)
    plugin = CRI_PLUGIN.get(version)
    if plugin is None:
        raise ContainerdConfigError("containerd config version %r is not supported (2 or 3)" % version)
    cri = copy.deepcopy(main.get("plugins", {}).get(plugin, {}))
    # The CRI plugin of containerd 2.x keeps runtimes under the same "containerd" table.
    runtimes = {}

    def runtime(bin_path):
        options = {"SystemdCgroup": bool(systemd_cgroup)}
        if bin_path:
            options["BinaryName"] = bin_path
        return {"privileged_without_host_devices": False, "runtime_type": "io.containerd.runc.v2",
                "options": options}

    # Setting any runtime replaces containerd's built-in map, whose only entry is runc (the default
    # handler): keep a runc runtime unless the main file defines its own.
    if "runc" not in cri.get("containerd", {}).get("runtimes", {}):
        runtimes["runc"] = runtime(None)
    runtimes[runtime_name] = runtime(binary)
    if cdi and cdi_runtime:
        runtimes[runtime_name + "-cdi"] = runtime(binary + ".cdi")
    extra = {"containerd": {"runtimes": runtimes}}
    if default:
        extra["containerd"]["default_runtime_name"] = runtime_name
    if cdi and (version >= 3 or _supports_cdi(containerd_version_output)):
        extra["enable_cdi"] = True
        extra["cdi_spec_dirs"] = list(cdi_spec_dirs)
    _deep_merge(cri, extra)
    return dumps({"version": version, "plugins": {plugin: cri}})


def _supports_cdi(containerd_version_output):
    m = re.search(r"(?:^|\s)v?(\d+)\.(\d+)\.\d+", containerd_version_output or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (1, 7)


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k):
    return k if _BARE.match(k) else json.dumps(k)


def _value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s = %s" % (_key(k), _value(x)) for k, x in v.items()) + "}"
    raise ContainerdConfigError("cannot write %r as TOML" % (v,))


def dumps(data):
    """A small TOML writer for containerd configs (tables, scalars, arrays)."""
    lines = []

    def table(path, d):
        scalars = [(k, v) for k, v in d.items() if not isinstance(v, dict)]
        tables = [(k, v) for k, v in d.items() if isinstance(v, dict)]
        if path and (scalars or not tables):
            lines.append("")
            lines.append("[%s]" % ".".join(_key(p) for p in path))
        for k, v in scalars:
            lines.append("%s = %s" % (_key(k), _value(v)))
        for k, v in tables:
            table(path + [k], v)

    table([], data)
    return "\n".join(lines).lstrip("\n") + "\n"
