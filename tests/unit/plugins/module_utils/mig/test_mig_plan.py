# -*- coding: utf-8 -*-
"""The pure MIG planner: validation, minimal plans, busy instances; property tests on every MIG model."""
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

MIG_MODELS = sorted(k for k, m in gpu_catalog.CATALOG.items() if m.profiles)
A100 = gpu_catalog.CATALOG["a100_80gb"]
H100 = gpu_catalog.CATALOG["h100_80gb"]
A30 = gpu_catalog.CATALOG["a30_24gb"]


def inst(profile, start, gid, busy=False, cis=None, model=A100):
    p = gpu_catalog.get_profile(model, profile)
    return mig_instances.Instance(p.name, start, p.memory_slices, gid, tuple(cis or (p.compute_slices,)), busy)


def targets(model, devices):
    return mig_plan.targets_from_mig_devices(devices, model.profiles, model.key)


def apply(current, plan):
    """The layout after executing a plan (as the engine would), as Instances."""
    destroyed = set(id(d) for d in plan.destroy)
    out = [i for i in current if id(i) not in destroyed]
    gid = max([i.gpu_instance_id for i in current] + [0]) + 1
    for t, start in plan.create:
        out.append(mig_instances.Instance(t.profile, start, None, gid, t.compute_instances, False))
        gid += 1
    return out


def check_physical(model, layout):
    """A layout obeys the GPU's rules: valid placements, no overlap, max counts, compute slices."""
    pmap = mig_plan.profile_map(model.profiles)
    used = 0
    for i in layout:
        p = pmap[i.profile]
        assert i.start in p.placements, i
        m = ((1 << p.memory_slices) - 1) << i.start
        assert not used & m, layout
        assert i.start + p.memory_slices <= model.memory_slices
        used |= m
        assert sum(i.compute_instances) <= p.compute_slices
    for name, n in Counter(i.profile for i in layout).items():
        assert n <= pmap[name].max_instances
    assert sum(pmap[i.profile].compute_slices for i in layout) <= model.compute_slices


def key_counts(items):
    return Counter((i.profile, tuple(i.compute_instances)) for i in items)


# ---------------------------------------------------------------- examples


def test_empty_to_all_1g():
    plan = mig_plan.plan_gpu(A100.profiles, [], targets(A100, {"1g.10gb": 7}))
    assert [s for _t, s in plan.create] == list(range(7))
    assert plan.keep == [] and plan.destroy == []


def test_matching_layout_is_all_kept():
    cur = [inst("3g.40gb", 4, 1), inst("2g.20gb", 0, 2), inst("1g.10gb", 2, 3), inst("1g.10gb", 3, 4)]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}))
    assert plan.keep == cur and plan.destroy == [] and plan.create == []


def test_add_one_1g_to_partly_used_gpu_destroys_nothing():
    cur = [inst("3g.40gb", 4, 1, busy=True), inst("1g.10gb", 0, 2, busy=True)]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"3g.40gb": 1, "1g.10gb": 2}))
    assert plan.destroy == [] and len(plan.keep) == 2
    assert [(t.profile, s) for t, s in plan.create] == [("1g.10gb", 1)]


def test_shrink_one_instance_keeps_the_rest():
    cur = [inst("3g.40gb", 0, 1), inst("3g.40gb", 4, 2)]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}))
    assert len(plan.keep) == 1 and len(plan.destroy) == 1
    freed = plan.destroy[0].start
    assert sorted(s for _t, s in plan.create) == [freed, freed + 2, freed + 3]


def test_kept_instance_that_blocks_is_released_minimally():
    # 1g.10gb at slice 4 blocks a 4g.40gb at 0? no: 4g sits on 0-3. Put it at 0: the 4g must go to 0,
    # so the 1g at 0 is released, the one at 5 stays.
    cur = [inst("1g.10gb", 0, 1), inst("1g.10gb", 5, 2)]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"4g.40gb": 1, "1g.10gb": 2}))
    assert [k.gpu_instance_id for k in plan.keep] == [2]
    assert [d.gpu_instance_id for d in plan.destroy] == [1]
    assert sorted((t.profile, s) for t, s in plan.create) == [("1g.10gb", 4), ("4g.40gb", 0)]


def test_busy_instance_is_preferred_for_keeping():
    # two idle 1g at 0 and a busy 1g at 1; a 4g (needs 0-3) + 1 x 1g: keep the busy... it is at 1,
    # inside the 4g's only placement, so the 4g cannot be placed without destroying it.
    cur = [inst("1g.10gb", 1, 1, busy=True), inst("1g.10gb", 6, 2)]
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"4g.40gb": 1, "1g.10gb": 1}))
    assert "busy" in e.value.msg and "force" in e.value.msg
    assert e.value.details["busy_instances"][0]["gpu_instance_id"] == 1
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"4g.40gb": 1, "1g.10gb": 1}), force=True)
    assert [f.gpu_instance_id for f in plan.forced] == [1]
    assert [k.gpu_instance_id for k in plan.keep] == [2]


def test_busy_kept_over_idle_of_same_profile():
    cur = [inst("1g.10gb", 0, 1), inst("1g.10gb", 1, 2, busy=True)]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"1g.10gb": 1}))
    assert [k.gpu_instance_id for k in plan.keep] == [2]
    assert [d.gpu_instance_id for d in plan.destroy] == [1]


def test_busy_instance_not_in_target_refused_without_force():
    cur = [inst("2g.20gb", 0, 1, busy=True)]
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"1g.10gb": 7}), label="GPU 0 (a100_80gb)")
    assert "not in the target layout" in e.value.msg and "GPU 0" in e.value.msg


def test_unknown_profile_names_valid_ones():
    with pytest.raises(GpuOpsError) as e:
        targets(H100, {"1g.5gb": 1})
    assert "valid profiles: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb" in e.value.msg
    assert e.value.details["valid_profiles"][0] == "1g.10gb"


def test_too_many_instances():
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, [], targets(A100, {"1g.10gb": 8}))
    assert "at most 7" in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, [], targets(A100, {"4g.40gb": 2}))
    assert "at most 1" in e.value.msg


def test_slices_do_not_fit():
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, [], targets(A100, {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}))
    assert "compute slices" in e.value.msg
    with pytest.raises(GpuOpsError) as e:
        mig_plan.plan_gpu(A100.profiles, [], targets(A100, {"3g.40gb": 1, "1g.20gb": 3}))
    assert "memory slices" in e.value.msg


def test_placement_search_respects_occupied_slices_and_placements():
    pmap = mig_plan.profile_map(A100.profiles)
    # 3g + 2 x 2g fits only with the 3g at 4 (2g.20gb cannot start at 6)
    want = targets(A100, {"3g.40gb": 1, "2g.20gb": 2})
    starts = mig_plan.place(want, pmap, 8)
    assert dict((t.profile, s) for t, s in zip(want, starts))["3g.40gb"] == 4
    # with slice 5 occupied there is no room for a 3g at 4, nor at 0 with two 2g left
    assert mig_plan.place(want, pmap, 8, occupied=1 << 5) is None
    # a 4g.40gb only fits at 0
    assert mig_plan.place(targets(A100, {"4g.40gb": 1}), pmap, 8, occupied=1 << 3) is None


def test_compute_instance_profiles_pack_into_gis():
    t = targets(A100, {"1c.3g.40gb": 3})
    assert t == [mig_plan.Target("3g.40gb", (1, 1, 1))]
    t = targets(A100, {"1c.3g.40gb": 4, "2c.3g.40gb": 1})
    assert sorted(t) == sorted([mig_plan.Target("3g.40gb", (2, 1)), mig_plan.Target("3g.40gb", (1, 1, 1))])
    t = targets(A100, {"3g.40gb": 1, "1c.3g.40gb": 1})
    assert sorted(t) == sorted([mig_plan.Target("3g.40gb", (3,)), mig_plan.Target("3g.40gb", (1,))])
    with pytest.raises(GpuOpsError) as e:
        targets(A100, {"3c.4g.40gb": 1})
    assert "1c.4g.40gb, 2c.4g.40gb" in e.value.msg


def test_ci_split_change_recreates_only_that_gi():
    cur = [inst("3g.40gb", 0, 1, cis=(3,)), inst("3g.40gb", 4, 2, cis=(3,))]
    plan = mig_plan.plan_gpu(A100.profiles, cur, targets(A100, {"3g.40gb": 1, "1c.3g.40gb": 3}))
    assert len(plan.keep) == 1 and len(plan.destroy) == 1
    assert plan.create == [(mig_plan.Target("3g.40gb", (1, 1, 1)), plan.destroy[0].start)]


def test_a30_four_slices():
    plan = mig_plan.plan_gpu(A30.profiles, [], targets(A30, {"2g.12gb": 1, "1g.6gb": 2}))
    check_physical(A30, apply([], plan))
    with pytest.raises(GpuOpsError):
        mig_plan.plan_gpu(A30.profiles, [], targets(A30, {"4g.24gb": 1, "1g.6gb": 1}))


def test_instances_from_gpu_groups_compute_instances():
    gpu = {"instances": [
        {"profile": "1c.3g.40gb", "placement": {"start": 4, "size": 4}, "gpu_instance_id": 2, "compute_instance_id": 0},
        {"profile": "1c.3g.40gb", "placement": {"start": 4, "size": 4}, "gpu_instance_id": 2, "compute_instance_id": 1,
         "busy": True},
        {"profile": "2g.20gb", "placement": {"start": 0, "size": 2}, "gpu_instance_id": 5, "compute_instance_id": 0},
    ], "processes": [{"pid": 1, "gpu_instance_id": 5}]}
    got = mig_instances.instances_from_gpu(gpu)
    assert got == [mig_instances.Instance("3g.40gb", 4, 4, 2, (1, 1), True), mig_instances.Instance("2g.20gb", 0, 2, 5, (2,), True)]


# ---------------------------------------------------------------- property tests


@st.composite
def layouts(draw, model, base=None):
    """A random physically valid layout (Instances with placements) on ``model``, optionally grown
    from ``base``."""
    pmap = mig_plan.profile_map(model.profiles)
    out = list(base or [])
    used = 0
    for i in out:
        used |= ((1 << i.size) - 1) << i.start
    gid = max([i.gpu_instance_id for i in out] + [0]) + 1
    for dummy in range(draw(st.integers(0, 8))):
        p = draw(st.sampled_from(model.profiles))
        counts = Counter(i.profile for i in out)
        compute = sum(pmap[i.profile].compute_slices for i in out)
        if counts[p.name] >= p.max_instances or compute + p.compute_slices > model.compute_slices:
            continue
        free = [s for s in p.placements
                if not used & (((1 << p.memory_slices) - 1) << s) and s + p.memory_slices <= model.memory_slices]
        if not free:
            continue
        s = draw(st.sampled_from(free))
        cis = (p.compute_slices,)
        if p.compute_slices > 1 and draw(st.booleans()):
            c = draw(st.sampled_from(list(gpu_catalog.ci_slice_options(p.compute_slices))))
            cis = tuple([c] * (p.compute_slices // c))
        out.append(mig_instances.Instance(p.name, s, p.memory_slices, gid, cis, draw(st.booleans())))
        used |= ((1 << p.memory_slices) - 1) << s
        gid += 1
    return out


def as_targets(layout):
    return [mig_plan.Target(i.profile, i.compute_instances) for i in layout]


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(data=st.data(), model_key=st.sampled_from(MIG_MODELS))
def test_any_layout_reaches_any_layout(data, model_key):
    model = gpu_catalog.CATALOG[model_key]
    current = data.draw(layouts(model))
    want = as_targets(data.draw(layouts(model)))
    plan = mig_plan.plan_gpu(model.profiles, current, want, force=True, label=model_key)
    after = apply(current, plan)
    check_physical(model, [i._replace(size=mig_plan.profile_map(model.profiles)[i.profile].memory_slices) for i in after])
    assert key_counts(after) == key_counts(want)
    # kept instances are never destroyed, everything else is
    assert not set(id(k) for k in plan.keep) & set(id(d) for d in plan.destroy)
    assert len(plan.keep) + len(plan.destroy) == len(current)
    assert set(id(f) for f in plan.forced) <= set(id(d) for d in plan.destroy)
    assert all(d.busy for d in plan.forced)
    # never more destroyed than flush-and-recreate, and a kept instance is one the target wants
    assert key_counts(plan.keep) - key_counts(want) == Counter()
    # idempotent: planning the result again changes nothing
    again = mig_plan.plan_gpu(model.profiles, [i._replace(size=mig_plan.profile_map(model.profiles)[i.profile].memory_slices)
                                               for i in after], want, label=model_key)
    assert again.destroy == [] and again.create == []


@FAST
@given(data=st.data(), model_key=st.sampled_from(MIG_MODELS))
def test_growing_a_layout_destroys_nothing(data, model_key):
    model = gpu_catalog.CATALOG[model_key]
    current = data.draw(layouts(model))
    grown = data.draw(layouts(model, base=current))
    plan = mig_plan.plan_gpu(model.profiles, current, as_targets(grown), label=model_key)
    assert plan.destroy == [] and plan.keep == current
    assert len(plan.create) == len(grown) - len(current)


@FAST
@given(data=st.data(), model_key=st.sampled_from(MIG_MODELS))
def test_busy_instances_never_destroyed_without_force(data, model_key):
    model = gpu_catalog.CATALOG[model_key]
    current = data.draw(layouts(model))
    want = as_targets(data.draw(layouts(model)))
    try:
        plan = mig_plan.plan_gpu(model.profiles, current, want, force=False, label=model_key)
    except GpuOpsError as e:
        assert "busy" in e.msg
        # refusing is only right when some busy instance cannot stay
        assert any(i.busy for i in current)
        return
    assert not any(d.busy for d in plan.destroy)
    assert plan.forced == []


@FAST
@given(data=st.data(), model_key=st.sampled_from(MIG_MODELS))
def test_subset_target_keeps_every_wanted_instance(data, model_key):
    """Shrinking to a subset of the current instances only destroys the ones left out."""
    model = gpu_catalog.CATALOG[model_key]
    current = data.draw(layouts(model))
    keep_mask = data.draw(st.lists(st.booleans(), min_size=len(current), max_size=len(current)))
    subset = [i for i, k in zip(current, keep_mask) if k]
    plan = mig_plan.plan_gpu(model.profiles, current, as_targets(subset), force=True, label=model_key)
    assert plan.create == []
    assert len(plan.keep) == len(subset)
    assert key_counts(plan.keep) == key_counts(subset)


# ---------------------------------------------------------------- profile naming


def test_mig_device_names():
    assert mig_plan.mig_device_names("3g.40gb", (3,), 3) == ["3g.40gb"]
    assert mig_plan.mig_device_names("3g.40gb", (2, 1), 3) == ["2c.3g.40gb", "1c.3g.40gb"]
    assert mig_plan.mig_device_names("1g.10gb+me", (1,), 1) == ["1g.10gb+me"]


def test_valid_profile_names_include_compute_instance_profiles():
    names = mig_plan.valid_profile_names(A100.profiles)
    assert "1c.3g.40gb" in names and "2c.3g.40gb" in names and "3c.3g.40gb" not in names
    assert "3c.7g.80gb" in names and "4c.7g.80gb" in names and "5c.7g.80gb" not in names


def test_live_profile_names_win_over_the_catalog():
    # a driver that names the 3-slice profile 3g.39gb (mig-parted#31): configs must use the live name
    live = [p._replace(name="3g.39gb") if p.name == "3g.40gb" else p for p in A100.profiles]
    assert mig_plan.targets_from_mig_devices({"3g.39gb": 2}, live) == [mig_plan.Target("3g.39gb", (3,))] * 2
    with pytest.raises(GpuOpsError) as e:
        mig_plan.targets_from_mig_devices({"3g.40gb": 2}, live, "GPU 0 (a100_80gb)")
    assert "3g.39gb" in e.value.msg and "GPU 0 (a100_80gb)" in e.value.msg


def test_label_safe_spelling_is_accepted_by_the_planner():
    # config *names* use 1g.10gb.me; the planner canonicalises it (the config parser rejects it in mig-devices)
    assert mig_plan.targets_from_mig_devices({"1g.10gb.me": 1}, A100.profiles) == [mig_plan.Target("1g.10gb+me", (1,))]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb"]), max_size=8),
       st.dictionaries(st.sampled_from(["1g.10gb", "2g.20gb", "3g.40gb"]), st.integers(0, 4)))
def test_keepable_subsets_are_the_brute_force_ones_in_order(kinds, wanted):
    """plan_gpu enumerates only the subsets it can keep, in the order a full enumeration would visit them
    (so ties between equal keep sets resolve as before)."""
    cand = [mig_instances.Instance(k, None, None, n, (int(k[0]),), False) for n, k in enumerate(kinds)]
    want = Counter({(k, (int(k[0]),)): n for k, n in wanted.items()})
    brute = [bits for bits in range(1 << len(cand))
             if all(n <= want[key] for key, n in Counter((cand[j].profile, cand[j].compute_instances)
                                                         for j in range(len(cand)) if bits >> j & 1).items())]
    assert mig_plan._keepable_subsets(cand, want) == brute
