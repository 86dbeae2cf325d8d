# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from ansible_collections.gpuops.k8s.plugins.filter.mig_inventory_drift import FilterModule, mig_inventory_drift


def test_the_filter_takes_k8s_info_resources():
    labels = {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": "success"}
    node = {"metadata": {"name": "dgx-a100-01", "labels": labels}}
    assert mig_inventory_drift(node, "all-3g.40gb") == ""
    assert "'all-3g.40gb'" in mig_inventory_drift(node, "all-1g.10gb", "dgx-a100-01")
    assert mig_inventory_drift(None, "all-1g.10gb") == ""
    assert FilterModule().filters()["mig_inventory_drift"] is mig_inventory_drift
