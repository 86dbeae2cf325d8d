# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gpuops.k8s.containerd_nvidia_dropin``: the containerd drop-in with the NVIDIA runtime."""

from __future__ import annotations

DOCUMENTATION = r"""
name: containerd_nvidia_dropin
short_description: Render a containerd drop-in that adds the NVIDIA runtime
version_added: "1.0.0"
author: gpuops.k8s contributors (@gpuops)
description:
  - Takes the text of containerd's main config and returns the drop-in text (TOML) with the NVIDIA runtime.
  - containerd merges imported files plugin by plugin, so the drop-in carries the main file's CRI plugin
    section with the NVIDIA runtime merged in; otherwise the main file's CRI settings would be lost.
  - Config version 2 (containerd 1.x, plugin C(io.containerd.grpc.v1.cri)) and 3 (containerd 2.x,
    C(io.containerd.cri.v1.runtime)).
options:
  _input:
    description: Text of the main config (may be empty).
    type: str
    required: true
  containerd_version:
    description: Output of C(containerd --version).
    type: str
  runtime_name:
    description: Runtime handler name.
    type: str
    default: nvidia
  binary:
    description: Path of nvidia-container-runtime.
    type: str
    default: /usr/bin/nvidia-container-runtime
  default:
    description: Make the NVIDIA runtime containerd's default runtime.
    type: bool
    default: false
  systemd_cgroup:
    description: Set C(SystemdCgroup) in the runtime options.
    type: bool
    default: true
  cdi:
    description: Enable CDI (containerd 1.7+) and add the C(<name>-cdi) runtime.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Render the drop-in
  ansible.builtin.copy:
    content: "{{ main_config_text | gpuops.k8s.containerd_nvidia_dropin(containerd_version=version_output) }}"
    dest: /etc/containerd/conf.d/99-nvidia.toml
    mode: "0644"
"""

RETURN = r"""
_value:
  description: The drop-in's TOML text.
  type: str
"""

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.k8s.plugins.plugin_utils.containerd_config import (
    ContainerdConfigError,
    nvidia_dropin,
)


def containerd_nvidia_dropin(main_config_text, containerd_version="", runtime_name="nvidia",
                             binary="/usr/bin/nvidia-container-runtime", default=False,
                             systemd_cgroup=True, cdi=False):
    try:
        return nvidia_dropin(main_config_text or "", containerd_version or "", runtime_name=runtime_name,
                             binary=binary, default=default, systemd_cgroup=systemd_cgroup, cdi=cdi)
    except ContainerdConfigError as e:
        raise AnsibleFilterError(str(e))


class FilterModule(object):
    def filters(self):
        return {"containerd_nvidia_dropin": containerd_nvidia_dropin}
