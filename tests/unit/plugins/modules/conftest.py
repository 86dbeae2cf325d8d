# -*- coding: utf-8 -*-
"""Run modules in-process: exit_json/fail_json raise (module_harness.Exit / Fail) and the simulator
environment variable is cleared, so a test decides the backend itself."""
import pytest
from ansible.module_utils import basic

from module_harness import Exit, Fail


@pytest.fixture(autouse=True)
def patch_exits(monkeypatch):
    def exit_json(self, **kw):
        raise Exit(kw)

    def fail_json(self, **kw):
        raise Fail(kw)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.delenv("GPUOPS_NVML_SIMULATOR", raising=False)
