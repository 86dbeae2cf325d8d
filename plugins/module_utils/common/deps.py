# -*- coding: utf-8 -*-
# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The modules' dependency checks in one place: which optional Python package a module needs, whether it imports,
and the one ``fail_json`` (Ansible's ``missing_required_lib`` message) when it does not.

A module calls ``check_requirements(module, "numpy")`` right after building its AnsibleModule, before it changes
anything. Packages are named by their import name; ``PIP_NAMES`` gives what to install where the two differ.
Python 3.9 compatible.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any, Dict, List, Optional

# import name -> the distribution to install
PIP_NAMES = {"numpy": "numpy", "scipy": "scipy", "pynvml": "nvidia-ml-py", "yaml": "PyYAML",
             "kubernetes": "kubernetes"}

_IMPORT_ERRORS: Dict[str, Optional[str]] = {}


def import_error(name: str) -> Optional[str]:
    """None when ``name`` imports, else the traceback of its ImportError (each package is tried once)."""
    if name not in _IMPORT_ERRORS:
        try:
            importlib.import_module(name)
            _IMPORT_ERRORS[name] = None
        except ImportError:
            _IMPORT_ERRORS[name] = traceback.format_exc()
    return _IMPORT_ERRORS[name]


def missing(*names: str) -> List[str]:
    """The packages of ``names`` that do not import, in the order given."""
    return [n for n in names if import_error(n) is not None]


def check_requirements(module: Any, *names: str, reason: Optional[str] = None) -> None:
    """End the module with ``fail_json`` (``missing_required_lib``'s message, the ImportError's traceback as
    ``exception``) for the first package of ``names`` that does not import."""
    for name in missing(*names):
        from ansible.module_utils.basic import missing_required_lib  # pylint: disable=import-outside-toplevel
        module.fail_json(msg=missing_required_lib(PIP_NAMES.get(name, name), reason=reason),
                         exception=import_error(name))
        return
