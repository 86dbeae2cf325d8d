import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

MIG_MODELS = ["a30_24gb", "a100_40gb", "a100_80gb", "h100_80gb", "h100_nvl_94gb", "h200_141gb",
              "gh200_96gb", "gh200_144gb", "b200_180gb"]


@pytest.mark.parametrize("memory,total,slices,expected", [
    (16384, 143771, 1, "1g.18gb"),   # H200 (worked examples of the naming rule)
    (71168, 143771, 3, "3g.71gb"),
    (22528, 183359, 1, "1g.23gb"),   # B200
    (11008, 95830, 1, "1g.12gb"),    # H100 NVL
    (5952, 24576, 1, "1g.6gb"),      # A30
])
def test_naming_rule_worked_examples(memory, total, slices, expected):
    assert gpu_catalog.profile_name_from_memory(memory, total, slices) == expected


@pytest.mark.parametrize("key", MIG_MODELS)
def test_catalog_names_agree_with_naming_rule(key):
    model = gpu_catalog.CATALOG[key]
    for p in model.profiles:
        suffix = gpu_catalog.CONSTANT_SUFFIX.get(p.constant, "")
        assert gpu_catalog.profile_name_from_memory(p.memory_mib, model.total_memory_mib, p.compute_slices,
                                                    suffix=suffix) == p.name


@pytest.mark.parametrize("key", MIG_MODELS)
def test_placements_fit_the_memory_slices(key):
    model = gpu_catalog.CATALOG[key]
    assert gpu_catalog.mig_capable(model)
    for p in model.profiles:
        assert p.placements, p
        assert len(p.placements) >= p.max_instances or p.max_instances == 1
        for start in p.placements:
            assert start % p.memory_slices == 0 or p.memory_slices == 1
            assert start + p.memory_slices <= model.memory_slices
    # the balanced layout of mig-parted uses existing profiles only
    for name in model.all_balanced:
        gpu_catalog.get_profile(model, name)


def test_required_models_are_present():
    for key in MIG_MODELS + ["l40s_48gb", "l4_24gb", "rtx4090_24gb"]:
        assert key in gpu_catalog.CATALOG
    assert not gpu_catalog.mig_capable(gpu_catalog.CATALOG["l40s_48gb"])


@pytest.mark.parametrize("ref,key", [
    ("h100_80gb", "h100_80gb"),
    ("NVIDIA H100 80GB HBM3", "h100_80gb"),
    ("NVIDIA H200 NVL", "h200_141gb"),
    ("0x233510DE", "h200_141gb"),
    (0x20B2, "a100_80gb"),
    (0x20B710DE, "a30_24gb"),
    ("NVIDIA L40S", "l40s_48gb"),
])
def test_find_model(ref, key):
    assert gpu_catalog.find_model(ref).key == key


def test_unknown_model_error_names_valid_keys():
    with pytest.raises(GpuOpsError) as exc:
        gpu_catalog.find_model("h900")
    assert "h100_80gb" in exc.value.msg and "a30_24gb" in exc.value.msg


def test_unknown_profile_error_names_valid_profiles():
    with pytest.raises(GpuOpsError) as exc:
        gpu_catalog.get_profile(gpu_catalog.CATALOG["a100_80gb"], "2g.10gb")
    assert "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb" in exc.value.msg


def test_parse_profile():
    assert gpu_catalog.parse_profile("1c.3g.20gb") == (1, "3g.20gb")
    assert gpu_catalog.parse_profile("3c.3g.20gb") == (None, "3g.20gb")
    assert gpu_catalog.parse_profile("1g.10gb.me") == (None, "1g.10gb+me")
    assert gpu_catalog.parse_profile("1g.24gb+me.all") == (None, "1g.24gb+me.all")
    with pytest.raises(GpuOpsError):
        gpu_catalog.parse_profile("big")


def test_ci_slice_options_follow_go_nvlib_rule():
    assert gpu_catalog.ci_slice_options(7) == (1, 2, 3, 4, 7)
    assert gpu_catalog.ci_slice_options(4) == (1, 2, 4)
    assert gpu_catalog.ci_slice_options(3) == (1, 2, 3)
    assert gpu_catalog.ci_slice_options(1) == (1,)


def test_generation_semantics():
    assert gpu_catalog.mig_mode_needs_reset(gpu_catalog.CATALOG["a100_80gb"]) and gpu_catalog.mig_mode_persistent(gpu_catalog.CATALOG["a30_24gb"])
    assert not gpu_catalog.mig_mode_needs_reset(gpu_catalog.CATALOG["h200_141gb"])
    assert not gpu_catalog.mig_mode_persistent(gpu_catalog.CATALOG["b200_180gb"])


def test_prices_and_driver_minimums():
    prices = gpu_catalog.default_prices({"l4_24gb": 0.7})
    assert prices["a100_80gb"] == 3.5 and prices["h100_80gb"] == 4.5 and prices["h200_141gb"] == 6.0
    assert prices["l40s_48gb"] == 1.5 and prices["rtx4090_24gb"] == 0.8 and prices["l4_24gb"] == 0.7
    vt = gpu_catalog.version_tuple
    assert vt("535.183.01") < vt(gpu_catalog.CATALOG["h200_141gb"].min_driver) <= vt("550.127.08")
    assert vt("560.35.03") < vt(gpu_catalog.CATALOG["b200_180gb"].min_driver)


def test_labels():
    assert gpu_catalog.label_safe("1g.10gb+me") == "1g.10gb.me"
    assert gpu_catalog.resource_name("1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert gpu_catalog.product_label("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
