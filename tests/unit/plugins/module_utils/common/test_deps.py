"""common.deps: the modules' dependency checks (missing_required_lib for the first package that does not import)."""
import pytest

from ansible_collections.gpuops.k8s.plugins.module_utils.common import deps


class _Failed(Exception):
    pass


class _Module(object):
    def fail_json(self, **kw):
        raise _Failed(kw)


def test_importable_packages_pass():
    assert deps.import_error("json") is None
    assert deps.missing("json", "os") == []
    deps.check_requirements(_Module(), "json", "os")  # no fail_json


def test_the_first_missing_package_fails_with_its_pip_name_and_traceback():
    assert deps.missing("json", "gpuops_no_such_pkg", "yaml") == ["gpuops_no_such_pkg"]
    deps._IMPORT_ERRORS["pynvml"] = "Traceback ...\nImportError: no pynvml\n"
    try:
        with pytest.raises(_Failed) as e:
            deps.check_requirements(_Module(), "json", "pynvml", "gpuops_no_such_pkg", reason="to read GPUs")
    finally:
        del deps._IMPORT_ERRORS["pynvml"]
    kw = e.value.args[0]
    # the pip name, not the import name; the reason; the traceback as the exception
    assert kw["msg"].startswith("Failed to import the required Python library (nvidia-ml-py) on ")
    assert "This is required to read GPUs." in kw["msg"]
    assert kw["exception"] == "Traceback ...\nImportError: no pynvml\n"
    with pytest.raises(_Failed) as e:
        deps.check_requirements(_Module(), "gpuops_no_such_pkg")
    assert "(gpuops_no_such_pkg)" in e.value.args[0]["msg"] and "ModuleNotFoundError" in e.value.args[0]["exception"]
