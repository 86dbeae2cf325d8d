# -*- coding: utf-8 -*-
"""Helpers shared by the in-process module tests (see conftest.py)."""
import pytest
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    """exit_json was called; args[0] is the result."""


class Fail(Exception):
    """fail_json was called; args[0] is the result."""


def call(module, args, expect=Exit):
    """Run ``module.main()`` with ``args``; return the result dict of the expected exit."""
    with patch_module_args(args):
        with pytest.raises((Exit, Fail)) as e:
            module.main()
    assert isinstance(e.value, expect), e.value.args[0]
    return e.value.args[0]
