# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from ansible_collections.gpuops.k8s.plugins.filter.k8s_dry_runnable import k8s_dry_runnable

OBJECTS = [
    {"kind": "Namespace", "metadata": {"name": "new"}},
    {"kind": "ConfigMap", "metadata": {"name": "a", "namespace": "new"}},
    {"kind": "ConfigMap", "metadata": {"name": "b", "namespace": "old"}},
    {"kind": "PriorityClass", "metadata": {"name": "gpu-low"}},
]


def test_objects_in_a_namespace_that_does_not_exist_are_deferred():
    info = {"resources": [{"metadata": {"name": "old"}}, {"metadata": {"name": "default"}}]}
    assert [o["metadata"]["name"] for o in k8s_dry_runnable(OBJECTS, info)] == ["new", "b", "gpu-low"]
    assert [o["metadata"]["name"] for o in k8s_dry_runnable(OBJECTS, info, deferred=True)] == ["a"]
    assert k8s_dry_runnable(OBJECTS, ["old", "new"], deferred=True) == []


def test_outside_check_mode_everything_is_applied():
    assert k8s_dry_runnable(OBJECTS, {"skipped": True, "changed": False}) == OBJECTS
    assert k8s_dry_runnable(OBJECTS, None) == OBJECTS
    assert k8s_dry_runnable(OBJECTS, {"skipped": True}, deferred=True) == []
