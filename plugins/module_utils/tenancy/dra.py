# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dynamic Resource Allocation (``resource.k8s.io/v1``, GA since Kubernetes 1.34) for GPUs and MIG devices.

Pure Python, Python 3.9 compatible. What it makes:

* DeviceClasses: ``gpu.nvidia.com`` (whole GPUs), ``mig.nvidia.com`` (any MIG device) - the two the
  NVIDIA DRA driver installs - and one per MIG profile, ``mig-<profile>.nvidia.com``, selecting on
  the device's ``profile`` attribute (CEL), so a ResourceClaimTemplate asks for a profile by class.
* ResourceSlices for a node from ``gpu_info`` facts, as the NVIDIA DRA driver (driver name
  ``gpu.nvidia.com``, one pool per node) publishes them: a GPU without MIG mode is one device
  ``gpu-<index>``; a GPU in MIG mode publishes its advertised MIG devices ``gpu-<index>-mig-<gi>-<ci>``
  (static MIG: the instances that exist; the parent is not allocatable while MIG mode is on).
  Attributes: ``type`` (gpu | mig), ``uuid``, ``productName``, ``brand``, ``architecture``, ``index``,
  ``driverVersion`` (semver), ``cudaDriverVersion`` (semver), ``profile`` / ``parentUUID`` /
  ``parentIndex`` on MIG devices; capacity ``memory``.
* Claim quotas: a ResourceQuota counts the devices requested through each DeviceClass as
  ``<class>.deviceclass.resource.k8s.io/devices``; a tenant's ``requests.nvidia.com/gpu`` and
  ``requests.nvidia.com/mig-<profile>`` map to the matching class (k8s.io/api core/v1
  ``ResourceClaimsPerClass``).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import resources
from ansible_collections.gpuops.k8s.plugins.module_utils.common import validation

DRA_API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
ALLOCATIONS = ("device-plugin", "dra", "dra-dynamic")


def mig_class(profile: str) -> str:
    """``1g.10gb`` (or ``1g.10gb+me``) -> ``mig-1g.10gb.nvidia.com``."""
    return "mig-%s.nvidia.com" % gpu_catalog.label_safe(gpu_catalog.canonical_profile_name(profile))


def class_for_resource(resource: str, where: str = "resource") -> str:
    """The DeviceClass a device-plugin resource name corresponds to."""
    res = resources.check_gpu_resource(resource, where)
    if res.endswith(resources.SHARED_SUFFIX):
        raise GpuOpsError("%s: %s is a time-slicing/MPS replica; DRA allocates whole GPUs and MIG devices "
                          "(nvidia.com/gpu, nvidia.com/mig-<profile>)" % (where, res))
    if res == "nvidia.com/gpu":
        return GPU_CLASS
    return mig_class(res[len("nvidia.com/mig-"):])


def device_classes(profiles: Optional[List[str]] = None, extended_resources: bool = False) -> List[Dict[str, Any]]:
    """DeviceClass manifests: whole GPUs, any MIG device and one class per profile (catalog by default).

    ``extended_resources``: the per-profile classes carry ``spec.extendedResourceName: nvidia.com/mig-<profile>``
    (DRAExtendedResource, GA in Kubernetes 1.37), so pods asking for that extended resource get a device of the
    class through DRA - what the device plugin advertised under the same name."""
    if profiles is None:
        profiles = [p for p in resources.mig_profiles()
                    if gpu_catalog.is_advertised_mig_device(gpu_catalog.canonical_profile_name(p))]
    base = "device.driver == '%s'" % DRIVER
    attr = "device.attributes['%s']" % DRIVER
    out = [
        {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": GPU_CLASS},
         "spec": {"selectors": [{"cel": {"expression": "%s && %s.type == 'gpu'" % (base, attr)}}]}},
        {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": MIG_CLASS},
         "spec": {"selectors": [{"cel": {"expression": "%s && %s.type == 'mig'" % (base, attr)}}]}},
    ]
    seen = set()
    for p in profiles:
        canon = gpu_catalog.canonical_profile_name(p)
        gpu_catalog.parse_profile(canon)
        name = mig_class(canon)
        if name in seen:
            continue
        seen.add(name)
        expression = "%s && %s.type == 'mig' && %s.profile == '%s'" % (base, attr, attr, canon)
        spec: Dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
        if extended_resources:
            spec["extendedResourceName"] = gpu_catalog.resource_name(canon)
        out.append({"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec})
    return out


def _semver(version):
    """``550.54.15`` -> ``550.54.15``; ``12.4`` -> ``12.4.0`` (DRA version attributes are semver)."""
    parts = [str(int(p)) for p in re.findall(r"\d+", str(version or ""))[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def _mib(mib):
    return "%dMi" % int(mib)


def node_devices(host: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The devices the NVIDIA DRA driver would publish for one host's ``gpu_info`` facts."""
    if not isinstance(host, dict) or not isinstance(host.get("gpus"), list):
        raise GpuOpsError("host facts must be the result of gpuops.k8s.gpu_info (a mapping with 'gpus')")
    driver = _semver(host.get("driver_version"))
    cuda = _semver(host.get("cuda_driver_version"))
    devices = []
    for g in host["gpus"]:
        if g.get("lost"):
            continue
        model = gpu_catalog.lookup_model(g.get("model") or g.get("pci_device_id"), g.get("name"))
        arch = model.architecture if model is not None else "unknown"
        common = {
            "productName": {"string": str(g.get("name") or "")},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": str(arch).capitalize()},
            "driverVersion": {"version": driver},
            "cudaDriverVersion": {"version": cuda},
        }
        index = int(g["index"])
        if not g.get("mig_mode_current"):
            attrs = dict(common, type={"string": "gpu"}, uuid={"string": str(g.get("uuid") or "")},
                         index={"int": index})
            devices.append({"name": "gpu-%d" % index, "attributes": attrs,
                            "capacity": {"memory": {"value": _mib(g.get("memory_total_mib") or 0)}}})
            continue
        for inst in g.get("instances") or []:
            if not inst.get("has_compute_instance") or not gpu_catalog.is_advertised_mig_device(inst["profile"]):
                continue
            profile = gpu_catalog.canonical_profile_name(inst["profile"])
            attrs = dict(common, type={"string": "mig"}, uuid={"string": str(inst.get("uuid") or "")},
                         profile={"string": profile}, parentUUID={"string": str(g.get("uuid") or "")},
                         parentIndex={"int": index}, index={"int": int(inst["gpu_instance_id"])})
            devices.append({"name": "gpu-%d-mig-%d-%d" % (index, inst["gpu_instance_id"], inst["compute_instance_id"]),
                            "attributes": attrs, "capacity": {"memory": {"value": _mib(inst["memory_mib"])}}})
    return devices


def resource_slice(node_name: str, host: Dict[str, Any], generation: int = 1) -> Dict[str, Any]:
    """One ResourceSlice (pool = node) for ``node_name`` from its ``gpu_info`` facts."""
    if not validation.DNS1123_SUBDOMAIN_RE.match(str(node_name or "")):
        raise GpuOpsError("node name %r is not a valid Kubernetes node name" % (node_name,))
    return {
        "apiVersion": DRA_API, "kind": "ResourceSlice",
        "metadata": {"name": "%s-%s" % (node_name, DRIVER.replace(".", "-")),
                     "labels": {"app.kubernetes.io/managed-by": "gpuops.k8s"}},
        "spec": {"driver": DRIVER, "nodeName": node_name,
                 "pool": {"name": node_name, "generation": int(generation), "resourceSliceCount": 1},
                 "devices": node_devices(host)},
    }


def claim_quota(hard: Dict[str, Any]) -> Dict[str, Any]:
    """The DRA quota keys for a normalized ``hard`` (``requests.nvidia.com/...`` keys) -> ``{key: count}``."""
    out = {}
    for key, qty in sorted((hard or {}).items()):
        if not (key.startswith("requests.") and resources.is_gpu_resource_key(key)):
            continue
        res = key[len("requests."):]
        if res.endswith(resources.SHARED_SUFFIX):
            continue
        out[class_for_resource(res, "quota %s" % key) + QUOTA_SUFFIX] = str(qty)
    return out


def tenant_claim_quotas(tenants: List[Dict[str, Any]]) -> Dict[str, Any]:
    """``{tenant: {<class>.deviceclass.resource.k8s.io/devices: n}}`` for validated tenants."""
    return dict((t["name"], claim_quota(t["quota"]["hard"])) for t in tenants)


def plan(tenants: List[Dict[str, Any]], profiles: Optional[List[str]] = None,
         extended_resources: bool = False) -> Tuple[Dict[str, Any], List[Any]]:
    """DeviceClasses and the tenants' claim quotas; ``(result, warnings)``."""
    classes = device_classes(profiles, extended_resources)
    quotas = tenant_claim_quotas(tenants)
    names = set(c["metadata"]["name"] for c in classes)
    warnings = []
    for tenant, hard in sorted(quotas.items()):
        for key in hard:
            cls = key[:-len(QUOTA_SUFFIX)]
            if cls not in names:
                raise GpuOpsError("tenant %s: quota for DeviceClass %s, which is not among the classes made (%s)"
                                  % (tenant, cls, ", ".join(sorted(names))))
    return {"device_classes": classes, "quotas": quotas}, warnings
