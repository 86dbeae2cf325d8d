# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule of the modules of the nvml action group (doc fragment gpuops.k8s.nvml): their own options
plus O(simulator), whose default is ``$GPUOPS_NVML_SIMULATOR``; check mode supported.

Python 3.9 compatible (runs on the GPU hosts).
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from ansible.module_utils.basic import AnsibleModule, env_fallback

from ansible_collections.gpuops.k8s.plugins.module_utils.common.module_exit import run_and_exit
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import ENV_SIMULATOR


def nvml_module(options: Dict[str, Any], **kwargs: Any) -> AnsibleModule:
    """``AnsibleModule`` with ``options`` and ``simulator`` (a path, default ``$GPUOPS_NVML_SIMULATOR``);
    ``kwargs`` go to AnsibleModule (``mutually_exclusive`` ...)."""
    spec = dict(options, simulator=dict(type="path", fallback=(env_fallback, [ENV_SIMULATOR])))
    return AnsibleModule(argument_spec=spec, supports_check_mode=True, **kwargs)


def retry_options() -> Dict[str, Dict[str, Any]]:
    """The argument spec of O(nvml_attempts) and O(nvml_backoff) (doc fragment gpuops.k8s.nvml.retries) of the
    modules that change MIG (mig_mode, mig_partition), a new dict each call."""
    return dict(
        nvml_attempts=dict(type="int", default=3),
        nvml_backoff=dict(type="float", default=1.0),
    )


def run_host_change(module: AnsibleModule, change: Callable[..., Dict[str, Any]]) -> None:
    """End the module with ``change(params, check_mode=..., run_command=...)`` (module_exit.run_and_exit)."""
    run_and_exit(module, lambda: change(module.params, check_mode=module.check_mode, run_command=module.run_command))
