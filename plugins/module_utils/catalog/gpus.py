# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU catalog: the single source of GPU and MIG facts for validation, the simulator and planning.

Facts come from shared/reference/mig-profiles.yaml (NVIDIA MIG user guide, real ``nvidia-smi mig
-lgip/-lgipp`` transcripts, mig-parted's default configs). Memory sizes are *observed* values and
differ between drivers: at run time the live NVML profile info (ids, memory sizes) wins over this
table. Profile ids are typical values only; code must look them up through NVML with the
``NVML_GPU_INSTANCE_PROFILE_*`` constant.

Pure Python, no NVML, Python 3.9 compatible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import math
import re
from collections import namedtuple

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

# NVML_GPU_INSTANCE_PROFILE_* constant values (nvml.h / pynvml).
GI_PROFILE_1_SLICE = 0
GI_PROFILE_2_SLICE = 1
GI_PROFILE_3_SLICE = 2
GI_PROFILE_4_SLICE = 3
GI_PROFILE_7_SLICE = 4
GI_PROFILE_8_SLICE = 5
GI_PROFILE_6_SLICE = 6
GI_PROFILE_1_SLICE_REV1 = 7  # +me
GI_PROFILE_2_SLICE_REV1 = 8  # +me (A30 2g)
GI_PROFILE_1_SLICE_REV2 = 9  # 1 compute slice, twice the memory
GI_PROFILE_COUNT = 18

# NVML_COMPUTE_INSTANCE_PROFILE_* constant values, keyed by compute slices.
CI_PROFILE_BY_SLICES = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}
CI_ENGINE_PROFILE_SHARED = 0

NVIDIA_VENDOR_ID = 0x10DE

# Architectures and what a MIG mode change means on them.
ARCH_AMPERE = "ampere"
ARCH_HOPPER = "hopper"
ARCH_BLACKWELL = "blackwell"
ARCH_ADA = "ada"
ARCH_TURING = "turing"

GiProfile = namedtuple(
    "GiProfile",
    [
        "name",  # e.g. "1g.10gb", "1g.10gb+me"
        "constant",  # NVML_GPU_INSTANCE_PROFILE_* value
        "profile_id",  # typical NVML profile id (what nvidia-smi prints); informative only
        "compute_slices",
        "memory_slices",
        "max_instances",
        "placements",  # tuple of start memory slices
        "memory_mib",  # observed MiB (driver dependent)
        "sm",  # streaming multiprocessors, None if not observed
    ],
)

GpuVariant = namedtuple("GpuVariant", ["nvml_name", "pci_device_id", "board"])

GpuModel = namedtuple(
    "GpuModel",
    [
        "key",
        "marketing_name",
        "variants",  # tuple of GpuVariant; the first is the default for the simulator
        "architecture",
        "total_memory_mib",
        "compute_slices",  # 0 when MIG is not supported
        "memory_slices",
        "profiles",  # tuple of GiProfile (empty when MIG is not supported)
        "all_balanced",  # dict profile -> count, as mig-parted's all-balanced
        "min_driver",  # oldest driver version that supports MIG on this model (string) or None
        "price_per_hour",  # default on-demand USD per GPU-hour, or None
        "notes",
    ],
)


def ci_slice_options(gi_compute_slices: int) -> Tuple[int, ...]:
    """Compute-instance sizes possible inside a GI of ``gi_compute_slices`` (go-nvlib rule)."""
    g = gi_compute_slices
    return tuple(c for c in range(1, g + 1) if c == g or 2 * c <= g + 1)


def _standard8(sizes, mem, sm=(16, 16, 26, 32, 60, 64, 132)):
    """The 7-compute / 8-memory-slice profile family of GA100/GH100/GB100 parts.

    ``sizes`` are the GB labels of (1g, 1g-rev2, 2g, 3g, 4g, 7g); ``mem`` the observed MiB of
    (1g, 1g-rev2, 2g, 3g, 4g, 7g) (None when not observed).
    """
    g1, g1r2, g2, g3, g4, g7 = sizes
    m1, m1r2, m2, m3, m4, m7 = mem
    s1, s1me, s1r2, s2, s3, s4, s7 = sm
    return (
        GiProfile("1g.%dgb" % g1, GI_PROFILE_1_SLICE, 19, 1, 1, 7, tuple(range(7)), m1, s1),
        GiProfile("1g.%dgb+me" % g1, GI_PROFILE_1_SLICE_REV1, 20, 1, 1, 1, tuple(range(7)), m1, s1me),
        GiProfile("1g.%dgb" % g1r2, GI_PROFILE_1_SLICE_REV2, 15, 1, 2, 4, (0, 2, 4, 6), m1r2, s1r2),
        GiProfile("2g.%dgb" % g2, GI_PROFILE_2_SLICE, 14, 2, 2, 3, (0, 2, 4), m2, s2),
        GiProfile("3g.%dgb" % g3, GI_PROFILE_3_SLICE, 9, 3, 4, 2, (0, 4), m3, s3),
        GiProfile("4g.%dgb" % g4, GI_PROFILE_4_SLICE, 5, 4, 4, 1, (0,), m4, s4),
        GiProfile("7g.%dgb" % g7, GI_PROFILE_7_SLICE, 0, 7, 8, 1, (0,), m7, s7),
    )


def _balanced8(profiles):
    return {profiles[0].name: 2, profiles[3].name: 1, profiles[4].name: 1}


_A100_SM = (14, 14, 14, 28, 42, 56, 98)

# Default on-demand prices, USD per GPU-hour, one GPU (override with the planner's ``prices``). Sources, read
# 2026: public on-demand list prices of AWS (g4dn.xlarge T4 $0.526, g5.xlarge A10 $1.006, g6 L4), Google Cloud
# (a2-highgpu A100 40GB, g2 L4) per GPU, and the 2026 provider surveys (mercatus-ai.com "cloud GPU pricing":
# A100 80GB $1.50-3.00 hyperscaler, H100 SXM $3.50-5.00, H200 $4.50-7.00; lyceum.technology: B200 $4.50-6.00
# specialised clouds, more on hyperscalers). The table takes the upper, hyperscaler-like end of each range so that
# the ratios between models hold; real prices differ by provider, commitment and region.

_MODELS: List[GpuModel] = []


def _mig_model(key, marketing, variants, arch, total, profiles, min_driver, price=None, notes="",
               compute_slices=7, memory_slices=8, balanced=None):
    _MODELS.append(GpuModel(
        key=key,
        marketing_name=marketing,
        variants=tuple(GpuVariant(*v) for v in variants),
        architecture=arch,
        total_memory_mib=total,
        compute_slices=compute_slices,
        memory_slices=memory_slices,
        profiles=profiles,
        all_balanced=balanced if balanced is not None else _balanced8(profiles),
        min_driver=min_driver,
        price_per_hour=price,
        notes=notes,
    ))


def _plain_model(key, marketing, variants, arch, total, price=None, notes=""):
    _MODELS.append(GpuModel(
        key=key,
        marketing_name=marketing,
        variants=tuple(GpuVariant(*v) for v in variants),
        architecture=arch,
        total_memory_mib=total,
        compute_slices=0,
        memory_slices=0,
        profiles=(),
        all_balanced={},
        min_driver=None,
        price_per_hour=price,
        notes=notes or "MIG not supported",
    ))


_mig_model(
    "a30_24gb", "NVIDIA A30 24GB",
    [("NVIDIA A30", 0x20B7, "A30 PCIe")],
    ARCH_AMPERE, 24576,
    (
        GiProfile("1g.6gb", GI_PROFILE_1_SLICE, 14, 1, 1, 4, (0, 1, 2, 3), 5952, 14),
        GiProfile("1g.6gb+me", GI_PROFILE_1_SLICE_REV1, 21, 1, 1, 1, (0, 1, 2, 3), 5952, 14),
        GiProfile("2g.12gb", GI_PROFILE_2_SLICE, 5, 2, 2, 2, (0, 2), 11968, 28),
        GiProfile("2g.12gb+me", GI_PROFILE_2_SLICE_REV1, 6, 2, 2, 1, (0, 2), 11968, 28),
        GiProfile("4g.24gb", GI_PROFILE_4_SLICE, 0, 4, 4, 1, (0,), 24000, 56),
    ),
    "460.73.01", compute_slices=4, memory_slices=4, balanced={"1g.6gb": 2, "2g.12gb": 1}, price=1.2,
)
_mig_model(
    "a100_40gb", "NVIDIA A100 40GB",
    [("NVIDIA A100-SXM4-40GB", 0x20B0, "A100 SXM4 40GB"),
     ("NVIDIA A100-PCIE-40GB", 0x20F1, "A100 PCIe 40GB"),
     ("NVIDIA A100-PCIE-40GB", 0x20B1, "A100 PCIe 40GB"),
     ("NVIDIA A800 40GB PCIe", 0x20F6, "A800 40GB PCIe")],
    ARCH_AMPERE, 40960,
    _standard8((5, 10, 10, 20, 20, 40), (4864, 9856, 9856, 19968, 19968, 40192), _A100_SM),
    "450.80.02", price=3.0,
)
_mig_model(
    "a100_80gb", "NVIDIA A100 80GB",
    [("NVIDIA A100-SXM4-80GB", 0x20B2, "A100 SXM4 80GB"),
     ("NVIDIA A100 80GB PCIe", 0x20B5, "A100 PCIe 80GB"),
     ("NVIDIA A800-SXM4-80GB", 0x20F3, "A800 SXM4 80GB"),
     ("NVIDIA A800 80GB PCIe", 0x20F5, "A800 80GB PCIe")],
    ARCH_AMPERE, 81920,
    _standard8((10, 20, 20, 40, 40, 80), (9728, 19968, 19968, 40192, 40192, 80896), _A100_SM),
    "450.80.02", price=3.5,
)
_mig_model(
    "h100_80gb", "NVIDIA H100 80GB",
    [("NVIDIA H100 80GB HBM3", 0x2330, "H100 SXM5 80GB"),
     ("NVIDIA H100 PCIe", 0x2331, "H100 PCIe"),
     ("NVIDIA H800 PCIe", 0x2322, "H800 PCIe"),
     ("NVIDIA H800", 0x2324, "H800")],
    ARCH_HOPPER, 81559,
    _standard8((10, 20, 20, 40, 40, 80), (9984, 20096, 20096, 40448, 40448, 81152)),
    "525.85.12", price=4.5,
)
_mig_model(
    "h100_nvl_94gb", "NVIDIA H100 NVL 94GB",
    [("NVIDIA H100 NVL", 0x2321, "H100 NVL"),
     ("NVIDIA H800 NVL", 0x233A, "H800 NVL")],
    ARCH_HOPPER, 95830,
    _standard8((12, 24, 24, 47, 47, 94), (11008, 22144, 22144, 47488, 47488, 95360)),
    "525.85.12", price=4.8,
)
# H200: ids, names, slices, instance counts, SMs, placements and engines confirmed on a real H200 SXM with
# driver 580.159.04 (tests/unit/plugins/module_utils/nvml/fixtures/hardware/); that driver reports 33280/71424/143360
# MiB for the 2-, 4- and 8-memory-slice profiles where these (an earlier driver's) are 33024/71168/143104.
_mig_model(
    "h200_141gb", "NVIDIA H200 141GB (SXM and NVL)",
    [("NVIDIA H200", 0x2335, "H200 SXM 141GB"),
     ("NVIDIA H200 NVL", 0x233B, "H200 NVL")],
    ARCH_HOPPER, 143771,
    _standard8((18, 35, 35, 71, 71, 141), (16384, 33024, 33024, 71168, 71168, 143104)),
    "550.90.07", price=6.0,
)
_mig_model(
    "gh200_96gb", "NVIDIA GH200 Grace Hopper 96GB HBM3",
    [("NVIDIA GH200 480GB", 0x2342, "GH200 120GB / 480GB"),
     ("NVIDIA H100 96GB", 0x233D, "H100 96GB")],
    ARCH_HOPPER, 97871,
    _standard8((12, 24, 24, 48, 48, 96), (11264, 23552, 23552, 47616, 47616, 95232)),
    None, price=5.0, notes="minimum driver not documented in the MIG guide's table",
)
_mig_model(
    "gh200_144gb", "NVIDIA GH200 144G HBM3e",
    [("NVIDIA GH200 144G HBM3e", 0x2348, "GH200 144G HBM3e")],
    ARCH_HOPPER, 147456,
    _standard8((18, 36, 36, 72, 72, 144), (17920, 36096, 36096, 72192, 72192, 144384)),
    None, price=5.5, notes="NVML name, total memory and 3g/4g/7g sizes not confirmed on hardware (estimated)",
)
_mig_model(
    "b200_180gb", "NVIDIA B200",
    [("NVIDIA B200", 0x2901, "B200")],
    ARCH_BLACKWELL, 183359,
    _standard8((23, 45, 45, 90, 90, 180), (22528, 45312, 45312, 90624, 90624, 181248),
               (18, 18, 30, 36, 72, 72, 148)),
    "570.133.20", price=8.0,
    notes="3g/4g/7g memory sizes and SM counts not confirmed on hardware (estimated); placements assumed "
          "to follow the 8-memory-slice pattern",
)
_plain_model("l40s_48gb", "NVIDIA L40S 48GB", [("NVIDIA L40S", 0x26B9, "L40S")], ARCH_ADA, 46068, price=1.5)
_plain_model("l4_24gb", "NVIDIA L4 24GB", [("NVIDIA L4", 0x27B8, "L4")], ARCH_ADA, 23034, price=0.8)
_plain_model("rtx4090_24gb", "NVIDIA GeForce RTX 4090",
             [("NVIDIA GeForce RTX 4090", 0x2684, "RTX 4090")], ARCH_ADA, 24564, price=0.8)
_plain_model("a10_24gb", "NVIDIA A10", [("NVIDIA A10", 0x2236, "A10")], ARCH_AMPERE, 23028, price=1.0)
_plain_model("t4_16gb", "NVIDIA T4", [("Tesla T4", 0x1EB8, "T4")], ARCH_TURING, 15360, price=0.53)

CATALOG = dict((m.key, m) for m in _MODELS)


def model_keys() -> List[str]:
    return sorted(CATALOG)


def mig_capable(model: GpuModel) -> bool:
    return bool(model.profiles)


def mig_mode_needs_reset(model: GpuModel) -> bool:
    """Ampere: a MIG mode change stays pending until a GPU reset, and persists across reboots."""
    return model.architecture == ARCH_AMPERE


def mig_mode_persistent(model: GpuModel) -> bool:
    """Hopper and newer: the mode applies at once but is lost on GPU reset or reboot."""
    return model.architecture == ARCH_AMPERE


def find_model(ref: Union[str, int, GpuModel]) -> GpuModel:
    """Return the GpuModel for a catalog key, an NVML name or a PCI device id.

    ``ref`` may be ``"h100_80gb"``, ``"NVIDIA H100 80GB HBM3"``, ``0x2330``, ``"0x2330"`` or a
    packed ``0x233010DE``. Raises GpuOpsError naming the valid keys when nothing matches.
    """
    model = lookup_model(ref)
    if model is None:
        raise GpuOpsError(
            "unknown GPU model %r; valid catalog keys: %s (NVML names and PCI device ids are "
            "accepted too)" % (ref, ", ".join(model_keys())),
            valid_models=model_keys(),
        )
    return model


def lookup_model(ref: Union[str, int, GpuModel, None], name: Optional[str] = None) -> Optional[GpuModel]:
    """Like find_model but returns None; with ``name`` given, the NVML name breaks ties."""
    if isinstance(ref, GpuModel):
        return ref
    if ref is None:
        return None
    if isinstance(ref, str):
        text = ref.strip()
        key = text.lower()
        if key in CATALOG:
            return CATALOG[key]
        for m in _MODELS:
            for v in m.variants:
                if v.nvml_name.lower() == key:
                    return m
        if re.match(r"^0x[0-9a-f]+$", key):
            ref = int(key, 16)
        else:
            return None
    if isinstance(ref, int):
        dev = ref >> 16 if ref > 0xFFFF else ref
        for m in _MODELS:
            for v in m.variants:
                if v.pci_device_id == dev:
                    return m
    return None


def variant_for(model: GpuModel, nvml_name: Optional[str] = None) -> GpuVariant:
    """The variant of ``model`` with that NVML name (default: the first)."""
    if nvml_name:
        for v in model.variants:
            if v.nvml_name.lower() == nvml_name.lower():
                return v
    return model.variants[0]


def get_profile(model: GpuModel, name: str) -> GiProfile:
    """The GiProfile called ``name`` on ``model`` or GpuOpsError naming the valid profiles."""
    canon = canonical_profile_name(name)
    for p in model.profiles:
        if p.name == canon:
            return p
    if not model.profiles:
        raise GpuOpsError("%s does not support MIG; profile %r cannot be used" % (model.marketing_name, name))
    raise GpuOpsError(
        "profile %r does not exist on %s; valid profiles: %s"
        % (name, model.marketing_name, ", ".join(p.name for p in model.profiles)),
        valid_profiles=[p.name for p in model.profiles],
    )


_PROFILE_RE = re.compile(
    r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>(?:\+(?:me|me\.all|gfx)(?:,(?:me|me\.all|gfx))*)|-me)?$"
)


def parse_profile(name: str) -> Tuple[Optional[int], str]:
    """Split a MIG profile string into (ci_slices or None, gi_name).

    ``"1c.3g.20gb"`` -> (1, "3g.20gb"); ``"3g.20gb"`` -> (None, "3g.20gb"). Accepts the
    label-safe spelling of mig-parted config *names* ("1g.10gb.me" -> "1g.10gb+me").
    Raises GpuOpsError on anything else.
    """
    text = canonical_profile_name(name)
    m = _PROFILE_RE.match(text)
    if not m:
        raise GpuOpsError(
            "%r is not a MIG profile string; expected [<C>c.]<G>g.<GB>gb[+me|+me.all|+gfx|-me], "
            "for example 1g.10gb, 3g.40gb or 1c.3g.40gb" % (name,)
        )
    gi = "%sg.%sgb%s" % (m.group("g"), m.group("gb"), m.group("attrs") or "")
    c = int(m.group("c")) if m.group("c") else None
    if c is not None and c == int(m.group("g")):
        c = None
    return c, gi


def is_advertised_mig_device(profile_name: str) -> bool:
    """Whether the NVIDIA device plugin advertises MIG devices of this profile to Kubernetes.

    It registers resources only for profiles whose compute instance spans the whole GPU instance
    (k8s-device-plugin internal/rm: ``if info.C != info.G`` the profile is skipped): the compute
    instances of a split GPU instance (``1c.3g.40gb``) are no Kubernetes device.
    """
    return parse_profile(profile_name)[0] is None


def canonical_profile_name(name: Any) -> str:
    text = str(name).strip().lower()
    # label-safe form used in config names: 1g.10gb.me -> 1g.10gb+me, 1g.24gb.me.all -> +me.all
    text = re.sub(r"^(\d+c\.)?(\d+g\.\d+gb)\.(me\.all|me|gfx)$", r"\1\2+\3", text)
    return text


def label_safe(name: str) -> str:
    """Kubernetes label values cannot hold '+': 1g.10gb+me -> 1g.10gb.me (as mig-parted does)."""
    return name.replace("+", ".")


def profile_name_from_memory(memory_mib: float, total_memory_mib: float, gi_slices: int, ci_slices: Optional[int] = None,
                             suffix: str = "") -> str:
    """NVIDIA's naming rule (go-nvlib getMigMemorySizeGB): the name NVML-based tools print.

    fraction = memory/total rounded up to eighths, times the total in whole GiB, rounded.
    """
    total_bytes = total_memory_mib * 1024 * 1024
    fraction = (memory_mib * 1024.0 * 1024.0) / total_bytes
    fraction = math.ceil(fraction * 8) / 8.0
    total_gb = math.ceil(total_bytes / float(1 << 30))
    gb = int(math.floor(fraction * total_gb + 0.5))
    base = "%dg.%dgb%s" % (gi_slices, gb, suffix)
    if ci_slices and ci_slices != gi_slices:
        return "%dc.%s" % (ci_slices, base)
    return base


# Suffix per NVML GI profile constant (REV2 has none).
CONSTANT_SUFFIX = {7: "+me", 8: "+me", 10: "+gfx", 11: "+gfx", 12: "+gfx", 13: "-me", 14: "-me", 15: "+me.all",
                   16: "+me.all", 17: "+gfx"}


def profile_by_constant(model: GpuModel, constant: int) -> Optional[GiProfile]:
    for p in model.profiles:
        if p.constant == constant:
            return p
    return None


# Video decoders of the whole GPU (the full-size GPU instance gets them all).
_FULL_DECODERS = {"a100_40gb": 5, "a100_80gb": 5, "a30_24gb": 4}


def profile_engines(model: GpuModel, profile: GiProfile) -> Dict[str, int]:
    """Shared engines of a GPU instance of ``profile`` (GiProfile): {copy, decoder, encoder, jpeg, ofa}.

    What ``nvidia-smi mig -lgip`` and NVML's profile info report, and what GFD labels as
    ``<resource>.engines.*`` (shared/reference/mig-profiles.yaml ``engines_lgip``): Ampere (A100, A30):
    a copy engine per compute slice, decoders 0/1/2/2 for 1/2/3/4 slices, all of them (A100: 5) for
    the whole GPU; Hopper and newer: a copy engine, a decoder and a JPEG decoder per compute slice,
    8 copy engines, 7 decoders and 7 JPEG decoders for the whole GPU. ``+me`` profiles get a decoder,
    a JPEG decoder and the OFA; so does the whole GPU. No MIG instance has an encoder.
    """
    full = profile.compute_slices >= model.compute_slices
    media = "+me" in profile.name or full
    slices = profile.compute_slices
    if model.architecture == ARCH_AMPERE:
        copy = slices
        decoder = _FULL_DECODERS.get(model.key, 5) if full else {1: 0, 2: 1, 3: 2, 4: 2}.get(slices, slices // 2)
        jpeg = 1 if media else 0
        if "+me" in profile.name:
            decoder = max(decoder, 1)
    else:
        copy = 8 if full else slices
        decoder = 7 if full else slices
        jpeg = decoder
    return {"copy": copy, "decoder": decoder, "encoder": 0, "jpeg": jpeg, "ofa": 1 if media else 0}


def resource_name(profile_name: str, strategy: str = "mixed") -> str:
    """Kubernetes extended resource the device plugin advertises for one MIG device."""
    if strategy == "single":
        return "nvidia.com/gpu"
    return "nvidia.com/mig-%s" % label_safe(profile_name)


def product_label(nvml_name: str) -> str:
    """GPU Feature Discovery's nvidia.com/gpu.product: the NVML name with spaces as dashes."""
    return nvml_name.replace(" ", "-")


def default_prices(overrides: Optional[Dict[str, float]] = None) -> Dict[str, Optional[float]]:
    prices = dict((k, m.price_per_hour) for k, m in CATALOG.items())
    prices.update(overrides or {})
    return prices


def version_tuple(version: Any) -> Tuple[int, ...]:
    out = []
    for part in str(version).split("."):
        digits = re.match(r"\d+", part)
        out.append(int(digits.group(0)) if digits else 0)
    return tuple(out)
