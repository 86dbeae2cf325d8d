# -*- coding: utf-8 -*-
"""Property test: any sequence of GPU instance creations and destructions keeps the MIG invariants,
and the simulator accepts a creation exactly when an independent oracle says it fits."""

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog
from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.api import INSUFFICIENT_RESOURCES, NvmlError, open_nvml

MIG_MODELS = sorted(k for k, m in gpu_catalog.CATALOG.items() if m.profiles)


def oracle_fits(model, existing, profile, start):
    """existing: list of (GiProfile, start)."""
    if sum(1 for p, _s in existing if p.name == profile.name) >= profile.max_instances:
        return False
    span = set(range(start, start + profile.memory_slices))
    for p, s in existing:
        if span & set(range(s, s + p.memory_slices)):
            return False
    return sum(p.compute_slices for p, _s in existing) + profile.compute_slices <= model.compute_slices


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(MIG_MODELS), ops=st.lists(st.tuples(st.booleans(), st.integers(0, 1000), st.integers(0, 1000)),
                                                     min_size=1, max_size=25))
def test_random_create_destroy_sequences_keep_the_invariants(key, ops):
    model = gpu_catalog.CATALOG[key]
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        nvml_sim.save_state(path, nvml_sim.new_state([{"model": key}], seed=0))
        with open_nvml(path) as nv:
            h = nv.nvmlDeviceGetHandleByIndex(0)
            nv.nvmlDeviceSetMigMode(h, 1)
            if nv.nvmlDeviceGetMigMode(h)[0] != 1:
                nv.reset_gpu(0)
            existing = {}  # gi id -> (profile, start)
            for create, a, b in ops:
                if create or not existing:
                    profile = model.profiles[a % len(model.profiles)]
                    start = profile.placements[b % len(profile.placements)]
                    fits = oracle_fits(model, list(existing.values()), profile, start)
                    try:
                        gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(
                            h, profile.profile_id, {"start": start, "size": profile.memory_slices})
                    except NvmlError as e:
                        assert e.value == INSUFFICIENT_RESOURCES
                        assert not fits, (profile.name, start, existing)
                        continue
                    assert fits, (profile.name, start, existing)
                    info = nv.nvmlGpuInstanceGetInfo(gi)
                    assert info.id not in existing
                    assert (info.placement.start, info.placement.size) == (start, profile.memory_slices)
                    existing[info.id] = (profile, start)
                else:
                    gi_id = sorted(existing)[a % len(existing)]
                    nv.nvmlGpuInstanceDestroy(nv.nvmlDeviceGetGpuInstanceById(h, gi_id))
                    del existing[gi_id]
                # invariants, read back through NVML
                seen = {}
                for p in model.profiles:
                    for g in nv.nvmlDeviceGetGpuInstances(h, p.profile_id):
                        info = nv.nvmlGpuInstanceGetInfo(g)
                        seen[info.id] = (p.name, info.placement.start)
                assert seen == dict((i, (p.name, s)) for i, (p, s) in existing.items())
                used = [m for p, s in existing.values() for m in range(s, s + p.memory_slices)]
                assert len(used) == len(set(used)) and max(used + [0]) < model.memory_slices
                assert sum(p.compute_slices for p, _s in existing.values()) <= model.compute_slices
    finally:
        os.unlink(path)
