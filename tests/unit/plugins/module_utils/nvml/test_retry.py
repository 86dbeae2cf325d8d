# -*- coding: utf-8 -*-
"""nvml.retry (issue 35 section 3): which NVML errors are tried again, how often, how long it waits."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common.errors import GpuOpsError
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml import retry
from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.errors import NvmlError, error_code


@pytest.mark.parametrize("name, transient", [
    # nvml.h: IN_USE 19 "the GPU is currently in use" (SetMigMode: "idle the device and retry"),
    # TIMEOUT 10, NOT_READY 27 "the system is not ready for the request"
    ("NVML_ERROR_IN_USE", True), ("NVML_ERROR_TIMEOUT", True), ("NVML_ERROR_NOT_READY", True),
    ("NVML_ERROR_INVALID_ARGUMENT", False), ("NVML_ERROR_NOT_SUPPORTED", False), ("NVML_ERROR_NO_PERMISSION", False),
    ("NVML_ERROR_INSUFFICIENT_RESOURCES", False), ("NVML_ERROR_GPU_IS_LOST", False),
    ("NVML_ERROR_RESET_REQUIRED", False), ("NVML_ERROR_UNKNOWN", False), ("NVML_ERROR_NOT_FOUND", False)])
def test_which_errors_are_transient(name, transient):
    assert retry.is_transient(NvmlError(error_code(name), call="x")) is transient


def test_in_use_seen_with_its_processes_is_not_transient():
    # the pre-check saw the PIDs: a running workload, not one releasing the instance
    assert retry.is_transient(NvmlError(19, call="nvmlGpuInstanceDestroy", pids=[4242])) is False
    assert retry.is_transient(GpuOpsError("not NVML")) is False


def test_backoff_doubles_from_the_first_wait():
    p = retry.RetryPolicy(4, 0.5)
    assert [p.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("attempts, backoff, word", [(0, 1.0, "nvml_attempts"), (21, 1.0, "nvml_attempts"),
                                                     (True, 1.0, "nvml_attempts"), (3, -1, "nvml_backoff"),
                                                     (3, 61, "nvml_backoff")])
def test_bad_policy_is_refused_naming_the_valid_range(attempts, backoff, word):
    with pytest.raises(GpuOpsError) as e:
        retry.RetryPolicy(attempts, backoff)
    assert word in e.value.msg and ("1 (no retry) to 20" in e.value.msg or "from 0 to 60" in e.value.msg)


def _script(outcomes):
    """An action that raises or returns the next outcome each call, and counts its calls."""
    calls = []

    def action():
        calls.append(1)
        out = outcomes[len(calls) - 1]
        if isinstance(out, Exception):
            raise out
        return out
    return action, calls


def test_transient_then_success_is_one_retry_with_one_wait():
    slept, seen = [], []
    action, calls = _script([NvmlError(10, call="c"), "made"])
    out = retry.call(retry.RetryPolicy(3, 2.0, slept.append), action, lambda: (False, None),
                     lambda e, n, d: seen.append((e.name, n, d)))
    assert out == "made" and len(calls) == 2
    assert seen == [("NVML_ERROR_TIMEOUT", 1, 2.0)] and slept == [2.0]


def test_settle_that_finds_the_change_made_stops_without_a_second_call():
    action, calls = _script([NvmlError(10, call="c"), "second call"])
    out = retry.call(retry.RetryPolicy(3, 0, lambda s: None), action, lambda: (True, "already there"))
    assert out == "already there" and len(calls) == 1


def test_permanent_error_is_raised_at_once():
    slept = []
    action, calls = _script([NvmlError(23, call="c"), "never"])
    with pytest.raises(NvmlError) as e:
        retry.call(retry.RetryPolicy(5, 1.0, slept.append), action, lambda: (False, None))
    assert len(calls) == 1 and slept == [] and e.value.details["attempts"] == 1
    assert "retries_exhausted" not in e.value.details and "after" not in e.value.msg


def test_attempts_exhausted_raise_the_last_error_with_its_attempts_and_every_change():
    slept = []
    errs = [NvmlError(19, call="c", nvml_changes=[{"step": n}]) for n in (1, 2, 3)]
    action, calls = _script(errs + ["never"])
    with pytest.raises(NvmlError) as e:
        retry.call(retry.RetryPolicy(3, 1.0, slept.append), action, lambda: (False, None))
    assert len(calls) == 3 and slept == [1.0, 2.0]
    d = e.value.details
    assert d["attempts"] == 3 and d["retries_exhausted"] is True and e.value.msg.endswith("(after 3 attempts)")
    assert d["nvml_changes"] == [{"step": 1}, {"step": 2}, {"step": 3}]


def test_one_attempt_means_no_retry():
    action, calls = _script([NvmlError(19, call="c"), "never"])
    with pytest.raises(NvmlError):
        retry.call(retry.RetryPolicy(1, 1.0, lambda s: None), action, lambda: (False, None))
    assert len(calls) == 1


def test_policy_from_params_uses_the_backends_sleep():
    class Backend(object):
        def __init__(self):
            self.waits = []

        def sleep(self, s):
            self.waits.append(s)
    b = Backend()
    p = retry.policy_from_params({"nvml_attempts": None, "nvml_backoff": None}, b)
    assert (p.attempts, p.backoff) == (3, 1.0)
    p.sleep(1.5)
    assert b.waits == [1.5]
