# -*- coding: utf-8 -*-
"""mig-parted v1 config parsing, validation and walk semantics."""
import os

import pytest
import yaml

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
DEFAULT_CONFIG = os.path.join(TOP, "tests", "integration", "targets", "mig_partition", "files",
                              "default-mig-parted-config.yaml")


def gpu(index, model, **kw):
    m = gpu_catalog.CATALOG[model]
    out = {"index": index, "model": model, "name": m.variants[0].nvml_name,
           "pci_device_id": "0x%04X" % m.variants[0].pci_device_id, "mig_capable": bool(m.profiles),
           "mig_mode_current": False, "mig_mode_pending": False, "instances": []}
    out.update(kw)
    return out


def spec(entries, name="cfg"):
    return {"version": "v1", "mig-configs": {name: entries}}


def entry(**kw):
    out = {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}
    out.update(kw)
    return dict((k, v) for k, v in out.items() if v is not None)


def err(data):
    with pytest.raises(GpuOpsError) as e:
        mig_config.parse_spec(data)
    return e.value.msg


# ---------------------------------------------------------------- validation rules


def test_missing_version():
    assert "missing 'version'" in err({"mig-configs": {"a": [entry()]}})


@pytest.mark.parametrize("version", ["v2", 1, "V1", None])
def test_wrong_version(version):
    assert "v1" in err({"version": version, "mig-configs": {"a": [entry()]}})


def test_unknown_top_level_field():
    msg = err({"version": "v1", "mig-configs": {"a": [entry()]}, "extra": 1})
    assert "unexpected field 'extra'" in msg and "mig-configs" in msg


def test_unknown_entry_field():
    msg = err(spec([dict(entry(), **{"mig_enabled": True})]))
    assert "unexpected field 'mig_enabled'" in msg and "mig-enabled" in msg


@pytest.mark.parametrize("configs", [None, {}, [], "all"])
def test_mig_configs_required_and_non_empty(configs):
    data = {"version": "v1"}
    if configs is not None:
        data["mig-configs"] = configs
    assert "mig-configs" in err(data)


@pytest.mark.parametrize("entries", [[], None, {}, "x"])
def test_config_needs_entries(entries):
    assert "non-empty list" in err(spec(entries))


def test_devices_required():
    assert "missing 'devices'" in err(spec([{"mig-enabled": False}]))


@pytest.mark.parametrize("devices", [7, "0,1", "ALL", [-1], ["0"], [True], 1.5, {"a": 1}])
def test_devices_must_be_all_or_int_list(devices):
    assert "devices" in err(spec([entry(devices=devices)]))


def test_devices_list_and_all_accepted():
    cfg = mig_config.parse_spec(spec([entry(devices=[0, 3]), entry(devices="all")]))["cfg"]
    assert cfg[0].devices == (0, 3) and cfg[1].devices == "all"


def test_mig_enabled_required_and_bool():
    assert "missing 'mig-enabled'" in err(spec([{"devices": "all"}]))
    assert "true or false" in err(spec([entry(**{"mig-enabled": "yes-please"})]))


def test_mig_devices_required_when_enabled():
    assert "mig-devices is required" in err(spec([{"devices": "all", "mig-enabled": True}]))


def test_mig_devices_empty_means_mig_on_no_instances():
    cfg = mig_config.parse_spec(spec([entry(**{"mig-devices": {}})]))["cfg"]
    assert cfg[0].mig_enabled is True and cfg[0].mig_devices == {}


def test_mig_devices_forbidden_when_disabled():
    assert "empty or absent" in err(spec([entry(**{"mig-enabled": False})]))
    # empty or absent is fine
    mig_config.parse_spec(spec([{"devices": "all", "mig-enabled": False, "mig-devices": {}}]))
    mig_config.parse_spec(spec([{"devices": "all", "mig-enabled": False}]))


def test_negative_count_rejected():
    assert ">= 0" in err(spec([entry(**{"mig-devices": {"1g.10gb": -1}})]))


def test_non_int_count_rejected():
    assert "integer" in err(spec([entry(**{"mig-devices": {"1g.10gb": "2"}})]))
    assert "integer" in err(spec([entry(**{"mig-devices": {"1g.10gb": True}})]))


def test_all_zero_counts_rejected_but_some_zero_ok():
    assert "every count is 0" in err(spec([entry(**{"mig-devices": {"1g.10gb": 0, "2g.20gb": 0}})]))
    cfg = mig_config.parse_spec(spec([entry(**{"mig-devices": {"1g.10gb": 0, "2g.20gb": 1}})]))["cfg"]
    assert cfg[0].mig_devices == {"1g.10gb": 0, "2g.20gb": 1}


@pytest.mark.parametrize("profile", ["1g.10gb", "1g.10gb+me", "1g.24gb+me.all", "1g.24gb+gfx", "1g.24gb-me",
                                     "1c.3g.40gb", "2c.7g.80gb", "1g.24gb+me,gfx"])
def test_profile_grammar_accepted(profile):
    cfg = mig_config.parse_spec(spec([entry(**{"mig-devices": {profile: 1}})]))["cfg"]
    assert cfg[0].mig_devices == {profile: 1}


@pytest.mark.parametrize("profile", ["1g", "10gb", "1g.10", "g.10gb", "1g.10gb+xx", "1g.10gb+me-me",
                                     "1g.10gb.me", "a1g.10gb", "1c.1c.3g.40gb", "1g.10gb+"])
def test_profile_grammar_rejected(profile):
    msg = err(spec([entry(**{"mig-devices": {profile: 1}})]))
    assert "invalid MIG profile" in msg and "1g.10gb" in msg


@pytest.mark.parametrize("flt,dev,vendor,sdev,svendor", [
    ("0x20B210DE", 0x20B2, 0x10DE, None, None),
    ("0x20b210de", 0x20B2, 0x10DE, None, None),
    ("548540638", 0x20B2, 0x10DE, None, None),  # base auto-detection: decimal
    ("0x20B210DE:0x147E10DE", 0x20B2, 0x10DE, 0x147E, 0x10DE),
])
def test_device_filter_forms(flt, dev, vendor, sdev, svendor):
    d = mig_config.parse_device_id(flt)
    assert (d.device, d.vendor, d.subsystem_device, d.subsystem_vendor) == (dev, vendor, sdev, svendor)


@pytest.mark.parametrize("flt", ["A100", "0x1FFFFFFFF", "0x20B210DE:0x1:0x2", "0xZZ", ["0x20B210DE", 5]])
def test_device_filter_rejected(flt):
    assert "device-filter" in err(spec([entry(**{"device-filter": flt})]))


def test_device_filter_string_or_list():
    cfg = mig_config.parse_spec(spec([entry(**{"device-filter": "0x20B210DE"}),
                                      entry(**{"device-filter": ["0x20B210DE", "0x233010DE"]})]))["cfg"]
    assert len(cfg[0].device_filter) == 1 and len(cfg[1].device_filter) == 2


# ---------------------------------------------------------------- selection


def test_select_config_by_name_and_single_default():
    configs = mig_config.parse_spec({"version": "v1", "mig-configs": {"a": [entry()], "b": [entry()]}})
    assert mig_config.select_config(configs, "b") is configs["b"]
    with pytest.raises(GpuOpsError) as e:
        mig_config.select_config(configs, "zzz", source="f.yaml")
    assert "valid configs: a, b" in e.value.msg and e.value.details["valid_configs"] == ["a", "b"]
    with pytest.raises(GpuOpsError) as e:
        mig_config.select_config(configs, None)
    assert "choose one" in e.value.msg
    single = mig_config.parse_spec(spec([entry()], "only"))
    assert mig_config.select_config(single, None) is single["only"]


def test_entries_from_params(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec([entry()], "one")))
    assert len(mig_config.entries_from_params({"config_file": str(path), "config": "one"})) == 1
    assert len(mig_config.entries_from_params({"layout": [entry(), entry()]})) == 2
    with pytest.raises(GpuOpsError):
        mig_config.entries_from_params({})
    with pytest.raises(GpuOpsError) as e:
        mig_config.entries_from_params({"config_file": str(tmp_path / "missing.yaml")})
    assert "cannot read" in e.value.msg
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\nmig-configs: [unclosed\n")
    with pytest.raises(GpuOpsError) as e:
        mig_config.entries_from_params({"config_file": str(bad)})
    assert "not valid YAML" in e.value.msg


def test_inline_layout_same_rules():
    with pytest.raises(GpuOpsError) as e:
        mig_config.entries_from_params({"layout": [{"devices": 3, "mig-enabled": False}]})
    assert e.value.msg.startswith("layout")


# ---------------------------------------------------------------- walk semantics


def test_unmatched_gpu_left_alone_and_last_entry_wins():
    gpus = [gpu(0, "a100_80gb"), gpu(1, "a100_80gb"), gpu(2, "a100_80gb")]
    entries = mig_config.parse_entries([
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"devices": [1], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
    ])
    res = mig_config.resolve(entries, gpus)
    assert sorted(res) == [0, 1]
    assert res[0].mig_devices == {"1g.10gb": 7}
    assert res[1].mig_devices == {"3g.40gb": 2} and res[1].entry == 1


def test_non_mig_gpu_skipped_under_all_and_disabled():
    gpus = [gpu(0, "l40s_48gb"), gpu(1, "h100_80gb"), {"index": 2, "lost": True, "mig_capable": None}]
    skipped = []
    res = mig_config.resolve(mig_config.parse_entries([{"devices": "all", "mig-enabled": True, "mig-devices": {}}]),
                             gpus, skipped)
    assert list(res) == [1]
    assert [(s["index"], s["reason"]) for s in skipped] == [(0, "MIG not supported"),
                                                            (2, "GPU is lost (fell off the bus)")]
    res = mig_config.resolve(mig_config.parse_entries([{"devices": [0], "mig-enabled": False}]), gpus)
    assert res == {}


def test_non_mig_gpu_listed_explicitly_with_mig_enabled_is_error():
    gpus = [gpu(0, "l40s_48gb")]
    with pytest.raises(GpuOpsError) as e:
        mig_config.resolve(mig_config.parse_entries([{"devices": [0], "mig-enabled": True, "mig-devices": {}}]), gpus)
    assert "cannot be partitioned (MIG not supported)" in e.value.msg


def test_device_filter_matching_device_and_subsystem():
    a = gpu(0, "a100_80gb", pci_subsystem_id="0x147E10DE")
    h = gpu(1, "h100_80gb")
    packed = gpu(2, "a100_80gb", pci_device_id="0x20B210DE")
    gpus = [a, h, packed]
    only_a100 = mig_config.parse_entries([{"device-filter": "0x20B210DE", "devices": "all", "mig-enabled": False}])
    assert sorted(mig_config.resolve(only_a100, gpus)) == [0, 2]
    sub = mig_config.parse_entries([{"device-filter": "0x20B210DE:0x147E10DE", "devices": "all", "mig-enabled": False}])
    assert sorted(mig_config.resolve(sub, gpus)) == [0]  # GPU 2 has no/other subsystem id
    other_vendor = mig_config.parse_entries([{"device-filter": "0x20B21234", "devices": "all", "mig-enabled": False}])
    assert mig_config.resolve(other_vendor, gpus) == {}


# ---------------------------------------------------------------- the default config, unchanged


@pytest.fixture(scope="module")
def defaults():
    return mig_config.load_config_file(DEFAULT_CONFIG)


EXPECTED = {
    # config -> model -> GI profile counts the planner must produce
    "all-1g.10gb": {"a100_80gb": {"1g.10gb": 7}, "h100_80gb": {"1g.10gb": 7}, "a100_40gb": {"1g.10gb": 4},
                    "h200_141gb": None, "l40s_48gb": None},
    "all-balanced": {"a100_80gb": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
                     "a100_40gb": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
                     "a30_24gb": {"1g.6gb": 2, "2g.12gb": 1},
                     "h100_nvl_94gb": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
                     "h200_141gb": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
                     "gh200_96gb": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
                     "b200_180gb": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
                     "l40s_48gb": None},
    "all-3g.40gb": {"h100_80gb": {"3g.40gb": 2}, "a100_80gb": {"3g.40gb": 2}, "h200_141gb": None},
    "all-1g.18gb": {"h200_141gb": {"1g.18gb": 7}, "gh200_144gb": {"1g.18gb": 7}},
    "all-1g.10gb.me": {"a100_80gb": {"1g.10gb+me": 1}},
    "all-7g.141gb": {"h200_141gb": {"7g.141gb": 1}},
    "all-enabled": {"a100_80gb": {}, "h200_141gb": {}, "l40s_48gb": None},
    "all-disabled": {"a100_80gb": "disabled", "l40s_48gb": None},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_default_config_resolves_per_model(defaults, name):
    entries = mig_config.select_config(defaults, name)
    for model, want in EXPECTED[name].items():
        g = gpu(0, model)
        res = mig_config.resolve(entries, [g])
        if want is None:
            assert res == {}, (name, model)
            continue
        if want == "disabled":
            assert res[0].mig_enabled is False
            continue
        m = gpu_catalog.CATALOG[model]
        targets = mig_plan.targets_from_mig_devices(res[0].mig_devices, m.profiles, model)
        counts = {}
        for t in targets:
            counts[t.profile] = counts.get(t.profile, 0) + 1
        assert counts == want, (name, model)
        # the planner accepts it on an empty GPU
        plan = mig_plan.plan_gpu(m.profiles, [], targets, label=model)
        assert len(plan.create) == len(targets)


def test_every_default_config_plans_on_every_model_it_matches(defaults):
    planned = {}
    for name, entries in sorted(defaults.items()):
        for model in gpu_catalog.model_keys():
            m = gpu_catalog.CATALOG[model]
            for v in m.variants:
                g = gpu(0, model, pci_device_id="0x%04X" % v.pci_device_id)
                res = mig_config.resolve(entries, [g])
                if 0 not in res or not res[0].mig_enabled:
                    continue
                targets = mig_plan.targets_from_mig_devices(res[0].mig_devices, m.profiles, model)
                plan = mig_plan.plan_gpu(m.profiles, [], targets, label=model)
                # on an empty GPU the plan creates exactly the configured instances, keeps and destroys nothing
                assert (plan.keep, plan.destroy) == ([], []), (name, v.nvml_name)
                assert sorted(t.profile for t, _start in plan.create) == sorted(t.profile for t in targets), (name, v.nvml_name)
                planned.setdefault(name, set()).add(model)
    # every MIG layout of the defaults was planned on the models EXPECTED names for it (no vacuous pass)
    for name, per_model in EXPECTED.items():
        for model, want in per_model.items():
            if isinstance(want, dict):
                assert model in planned.get(name, set()), (name, model)


def test_h200_nvl_gap_in_all_1g_35gb(defaults):
    entries = mig_config.select_config(defaults, "all-1g.35gb")
    sxm = gpu(0, "h200_141gb")
    nvl = gpu(1, "h200_141gb", pci_device_id="0x233B")
    assert sorted(mig_config.resolve(entries, [sxm, nvl])) == [0]
