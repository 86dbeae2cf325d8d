# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What several filter plugins share: the error wrapper around their one call into module_utils, and the
``FilterModule`` class that lists them.

Controller side only (plugin_utils: filters run on the controller, where ``ansible.errors`` exists); no module imports it.
Python 3.9 compatible.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Tuple, Type

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError

DATA_ERRORS = (GpuOpsError, KeyError, TypeError, ValueError)
"""What a bad input raises in the DRA builders."""
SHAPE_ERRORS = (GpuOpsError, KeyError, TypeError, AttributeError)
"""What a wrongly shaped plan, node list or pod list raises in the planner."""


def filter_errors(errors: Tuple[Type[BaseException], ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: one of ``errors`` raised by the filter becomes ``AnsibleFilterError("<filter name>: <error>")``."""
    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def filter_func(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except errors as e:
                from ansible.errors import AnsibleFilterError
                raise AnsibleFilterError("%s: %s" % (func.__name__, e))
        return filter_func
    return wrap


def filter_module(*funcs: Callable[..., Any]) -> type:
    """A ``FilterModule`` class whose ``filters()`` maps each function's name to the function."""
    class FilterModule(object):
        def filters(self) -> dict:
            return dict((f.__name__, f) for f in funcs)
    return FilterModule
