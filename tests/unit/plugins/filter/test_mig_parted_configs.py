"""The role reads the site's mig-parted file through this filter: duplicate keys refused with the line (issue 16 item 6)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.filter.mig_parted_configs import mig_parted_configs


def test_configs_returned_as_written():
    text = "version: v1\nmig-configs:\n  a:\n    - devices: [0, 1]\n      mig-enabled: true\n      mig-devices: {1g.10gb: 7}\n"
    assert mig_parted_configs(text, "f.yaml") == {"a": [{"devices": [0, 1], "mig-enabled": True,
                                                         "mig-devices": {"1g.10gb": 7}}]}


def test_duplicate_config_is_refused_with_the_line():
    text = ("version: v1\nmig-configs:\n  a:\n    - {devices: all, mig-enabled: false}\n"
            "  a:\n    - {devices: all, mig-enabled: true, mig-devices: {}}\n")
    with pytest.raises(AnsibleFilterError) as e:
        mig_parted_configs(text, "site.yaml")
    assert "site.yaml" in str(e.value) and "duplicate key 'a' at line 5" in str(e.value)


def test_invalid_config_is_refused():
    with pytest.raises(AnsibleFilterError) as e:
        mig_parted_configs("version: v2\nmig-configs: {}\n", "site.yaml")
    assert "the only valid version is v1" in str(e.value)
