# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last lines every thin module shares: its one call into module_utils, the one exception type turned into
``fail_json``, then ``exit_json``.

Python 3.9 compatible; it needs nothing but the AnsibleModule it is given.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError


def run_and_exit(module: Any, call: Callable[[], Dict[str, Any]], changed: Optional[bool] = None,
                 warnings: bool = False) -> None:
    """Run ``call()`` and end the module with its result.

    A GpuOpsError becomes ``fail_json(msg, **details)``; the result's ``diff`` goes out only when the task asks for
    a diff; with ``warnings`` the result's ``warnings`` list becomes module warnings; ``changed`` (when given) is
    what the result reports (a plan or a read changes nothing).
    """
    try:
        result = call()
    except GpuOpsError as e:
        module.fail_json(msg=e.msg, **e.details)
        return
    if not module._diff:
        result.pop("diff", None)
    if warnings:
        for warning in result.pop("warnings", None) or []:
            module.warn(warning)
    if changed is not None:
        result["changed"] = changed
    module.exit_json(**result)
