"""The device_plugin role's dra_mig_mode entry point picks Ampere GPUs by catalog key (device_plugin_dra_ampere_models):
the pattern must match exactly the catalog's MIG models whose architecture is Ampere."""
import os
import re

import yaml

from ansible_collections.gpuops.k8s.plugins.module_utils.catalog import gpus as gpu_catalog

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_ampere_pattern_matches_the_catalogs_ampere_mig_models_only():
    with open(os.path.join(TOP, "roles", "device_plugin", "defaults", "main.yml")) as f:
        pattern = yaml.safe_load(f)["device_plugin_dra_ampere_models"]
    mig = [k for k, m in gpu_catalog.CATALOG.items() if gpu_catalog.mig_capable(m)]
    matched = sorted(k for k in mig if re.match(pattern, k))
    ampere = sorted(k for k in mig if gpu_catalog.mig_mode_needs_reset(gpu_catalog.CATALOG[k]))
    assert ampere == ["a100_40gb", "a100_80gb", "a30_24gb"]
    assert matched == ampere
