# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.mig_parted_configs``: the configs of a mig-parted v1 file, validated as mig-parted does."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.mig import config as mig_config

DOCUMENTATION = r"""
name: mig_parted_configs
short_description: The configs of a mig-parted v1 config file, validated as mig-parted validates them
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Parses the text of a mig-parted v1 config file and returns its C(mig-configs) mapping (config name to its
    list of entries), after the checks of M(gpuops.k8s.mig_partition) with O(gpuops.k8s.mig_partition#module:config_file).
  - Duplicate mapping keys are refused with their line, as mig-parted's Go YAML parser refuses them (the
    C(from_yaml) filter would silently keep the last one).
options:
  _input:
    description: Text of the config file (for example from the C(ansible.builtin.file) lookup).
    type: str
    required: true
  source:
    description: Name of the file, used in error messages.
    type: str
    default: config
"""

EXAMPLES = r"""
- name: Read the site's MIG configs
  ansible.builtin.set_fact:
    mig_configs: "{{ lookup('ansible.builtin.file', 'files/mig-config.yaml') | gpuops.k8s.mig_parted_configs('files/mig-config.yaml') }}"
"""

RETURN = r"""
_value:
  description: The C(mig-configs) mapping of the file, config name to its entries (as written in the file).
  type: dict
"""


def mig_parted_configs(text, source="config"):
    try:
        data = mig_config.load_config_text(text, source)
        mig_config.parse_spec(data, source=source)
    except GpuOpsError as e:
        raise AnsibleFilterError(e.msg)
    return data["mig-configs"]


class FilterModule(object):
    def filters(self):
        return {"mig_parted_configs": mig_parted_configs}
