"""Doc fragments: every fragment is one literal string that parses as YAML.

ansible-test's yamllint sanity test reads fragments from the source text (ast), not by importing them:
a fragment built with ``+`` or a format call makes it crash (seen in CI), so that is caught here first.
"""
import ast
import os

import pytest
import yaml

FRAGMENTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "doc_fragments")
FILES = sorted(f for f in os.listdir(FRAGMENTS) if f.endswith(".py") and f != "__init__.py")


def _assignments(path):
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModuleDocFragment"]
    assert len(classes) == 1, "%s: one ModuleDocFragment class" % path
    return [n for n in classes[0].body if isinstance(n, ast.Assign)]


def test_there_are_fragments():
    assert {"attributes.py", "k8s_connection.py", "nvml.py"} <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_fragment_is_a_literal_yaml_string(name):
    assigns = _assignments(os.path.join(FRAGMENTS, name))
    assert assigns, name
    for node in assigns:
        target = node.targets[0].id
        assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str), \
            "%s: %s must be a literal string (ansible-test's yamllint reads the source)" % (name, target)
        doc = yaml.safe_load(node.value.value)
        assert isinstance(doc, dict) and "options" in doc, "%s: %s is a mapping with options" % (name, target)
