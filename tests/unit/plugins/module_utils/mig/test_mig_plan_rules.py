# -*- coding: utf-8 -*-
"""mig/plan.py through its public functions, the cases make mutate found unpinned (docs/testing.md): the error of a
GPU without MIG and of a key that is no profile, a zero count, how a layout with compute instances is described,
a GPU geometry smaller than the profiles' placements, and a current layout whose instances overlap (kept apart,
never both). Expected values from the A100 80GB / A30 MIG geometry (NVIDIA MIG user guide: A100 1g.10gb at slices
0-6, 2g.20gb at 0, 2 or 4; A30 4g.24gb splits into 1c and 2c compute instances)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import instances as mig_instances
from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import plan as mig_plan

A100 = gpu_catalog.CATALOG["a100_80gb"]
A30 = gpu_catalog.CATALOG["a30_24gb"]
T = mig_plan.Target


def _inst(profile, start, gid, model=A100):
    p = gpu_catalog.get_profile(model, profile)
    return mig_instances.Instance(p.name, start, p.memory_slices, gid, (p.compute_slices,), False)


def test_a_gpu_without_mig_profiles_says_so():
    with pytest.raises(GpuOpsError) as err:
        mig_plan.find_profile([], "3g.40gb", "Tesla T4")
    assert str(err.value) == "Tesla T4 does not support MIG (no MIG profiles); 3g.40gb cannot be used"


def test_a_key_that_is_no_profile_names_the_valid_ones():
    with pytest.raises(GpuOpsError) as err:
        mig_plan.targets_from_mig_devices({"foo": 1}, A30.profiles, "a30")
    msg = str(err.value)
    assert msg.startswith("foo is not a MIG profile; valid profiles on a30: 1g.6gb, ")
    assert "2g.12gb" in msg and "1c.4g.24gb" in msg and "2c.4g.24gb" in msg


def test_a_zero_count_asks_for_nothing_and_skips_nothing_else():
    assert mig_plan.targets_from_mig_devices({"1g.6gb": 0, "2g.12gb": 1}, A30.profiles, "a30") == [
        T("2g.12gb", (2,))]


def test_describe_targets_spells_out_compute_instances():
    assert mig_plan.describe_targets([T("4g.24gb", (2, 1, 1)), T("1g.6gb", (1,)), T("1g.6gb", (1,))]) == (
        "2 x 1g.6gb, 1 x 4g.24gb(2c+1c+1c)")


def test_placements_stay_inside_a_smaller_geometry():
    """Four 1g.10gb on a GPU given 4 memory slices: slices 0-3, although the profile has placements up to 6."""
    plan = mig_plan.plan_gpu(A100.profiles, [], [T("1g.10gb", (1,))] * 4, memory_slices=4)
    assert [s for _t, s in plan.create] == [0, 1, 2, 3]


def test_overlapping_current_instances_are_never_both_kept():
    """1g.10gb at 0 and 2g.20gb at 0 overlap (slices 0 and 0-1): a reading of a layout that cannot exist. The plan
    keeps the larger with the 1g.10gb at 6, destroys the 1g.10gb at 0 and creates one 1g.10gb in slices 2-5."""
    current = [_inst("1g.10gb", 0, 1), _inst("2g.20gb", 0, 2), _inst("1g.10gb", 6, 3)]
    plan = mig_plan.plan_gpu(A100.profiles, current, [T("1g.10gb", (1,))] * 2 + [T("2g.20gb", (2,))])
    assert plan.keep == current[1:] and plan.destroy == current[:1]
    assert [t for t, _s in plan.create] == [T("1g.10gb", (1,))] and plan.create[0][1] in (2, 3, 4, 5)


def test_a_new_instance_goes_where_it_leaves_the_most_room():
    """A100 80GB with a 4g.40gb at slices 0-3; one 1g.10gb more. At 4 or 5 it leaves 1g.10gb x2 and 1g.20gb at 6
    free (3 placements of those profiles); at 6 it leaves 1g.10gb at 4 and 5, 1g.20gb at 4 and 2g.20gb at 4 (4):
    slice 6, "a 1g next to a 4g goes where a 2g still fits beside it". The plan lists creations by start."""
    current = [_inst("4g.40gb", 0, 1)]
    plan = mig_plan.plan_gpu(A100.profiles, current, [T("4g.40gb", (4,)), T("1g.10gb", (1,))])
    assert plan.keep == current and plan.destroy == [] and plan.create == [(T("1g.10gb", (1,)), 6)]
    plan = mig_plan.plan_gpu(A100.profiles, [], [T("1g.10gb", (1,)), T("4g.40gb", (4,))])
    assert plan.create == [(T("4g.40gb", (4,)), 0), (T("1g.10gb", (1,)), 6)]


def test_compute_instances_pack_first_fit_decreasing():
    """A30 4g.24gb GIs (4 compute slices) for two 2c and two 1c: 2+2 fill one GI, 1+1 the next (first-fit
    decreasing; increasing order would give 1+1+2 and 2)."""
    assert mig_plan.targets_from_mig_devices({"1c.4g.24gb": 2, "2c.4g.24gb": 2}, A30.profiles, "a30") == [
        T("4g.24gb", (2, 2)), T("4g.24gb", (1, 1))]


def test_the_memory_check_names_the_slices_needed():
    with pytest.raises(GpuOpsError) as err:
        mig_plan.plan_gpu(A100.profiles, [], [T("3g.40gb", (3,))] + [T("1g.20gb", (1,))] * 3, label="a100")
    assert str(err.value) == "layout 3 x 1g.20gb, 1 x 3g.40gb needs 10 memory slices but a100 has 8"


def test_a_busy_instance_in_the_way_names_the_layout():
    busy = mig_instances.Instance("1g.10gb", 0, 1, 1, (1,), True)
    with pytest.raises(GpuOpsError) as err:
        mig_plan.plan_gpu(A100.profiles, [busy], [T("7g.80gb", (7,))])
    assert str(err.value) == ("GPU: the layout 1 x 7g.80gb needs to destroy busy MIG instance(s) 1g.10gb gi 1 at 0 "
                              "(processes are running on them; they are not in the target layout); stop the "
                              "workloads or set force: true")
