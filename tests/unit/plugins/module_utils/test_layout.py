# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module_utils layout (docs/architecture.md): no import circle, read-only modules ship no
simulator mutations, simulator files stay small."""
import ast
import os

from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLUGINS = os.path.join(TOP, "plugins")
PREFIX = "ansible_collections.gpuops.k8s.plugins."


def _path(dotted):
    """plugins-relative file of a dotted name under ansible_collections.gpuops.k8s.plugins, or None."""
    rel = dotted[len(PREFIX):].replace(".", os.sep)
    for cand in (rel + ".py", os.path.join(rel, "__init__.py")):
        if os.path.isfile(os.path.join(PLUGINS, cand)):
            return cand
    return None


def _imports(rel):
    """Files a plugins file imports (every import statement, also those inside functions, as AnsiballZ sees them)."""
    with open(os.path.join(PLUGINS, rel)) as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + ["%s.%s" % (node.module, a.name) for a in node.names]
        for name in names:
            if name.startswith(PREFIX):
                p = _path(name)
                if p and p != rel:
                    out.add(p)
    return out


def _graph():
    graph = {}
    for root, _dirs, files in os.walk(os.path.join(PLUGINS, "module_utils")):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f), PLUGINS)
                graph[rel] = {d for d in _imports(rel) if not d.endswith("__init__.py")}
    return graph


def _closure(start):
    seen, todo = set(), [start]
    while todo:
        cur = todo.pop()
        for dep in _imports(cur):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_no_import_circle_in_module_utils():
    graph = _graph()
    state = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep] if dep in stack else [node, dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []
    # the old circle: nvml <-> simulator; now errors and the backend interface sit below both backends
    assert "module_utils/sim/reader.py" not in _closure("module_utils/nvml/errors.py")
    assert "module_utils/nvml/factory.py" not in _closure("module_utils/sim/writer.py")


def test_read_only_modules_ship_no_simulator_mutations():
    for module in ("gpu_info", "gpu_health_check"):
        deps = _closure(os.path.join("modules", module + ".py"))
        assert "module_utils/sim/reader.py" in deps and "module_utils/nvml/pynvml_backend.py" in deps
        assert "module_utils/sim/writer.py" not in deps and "module_utils/sim/configure.py" not in deps, module
    for module in ("mig_partition", "mig_mode", "gpu_settings"):
        assert "module_utils/sim/writer.py" in _closure(os.path.join("modules", module + ".py")), module


def test_simulator_files_stay_small():
    sim = os.path.join(PLUGINS, "module_utils", "sim")
    sizes = {f: sum(1 for _line in open(os.path.join(sim, f))) for f in os.listdir(sim) if f.endswith(".py")}
    assert max(sizes.values()) <= 500, sizes


def test_the_read_path_has_no_setters():
    from ansible_collections.gpuops.k8s.plugins.module_utils.nvml.backend import Backend
    for call in nvml_sim.MUTATING_CALLS:
        if call == "reset_gpu":  # part of the backend interface, not implemented by the read path
            assert nvml_sim.SimReader.reset_gpu is Backend.reset_gpu
        else:
            assert not hasattr(nvml_sim.SimReader, call), call
        assert getattr(nvml_sim.SimBackend, call) is not getattr(Backend, call, None), call


def test_the_mig_roles_boot_unit_gets_every_file_it_imports():
    """roles/mig copies module_utils files to the host for gpuops-mig-restore: exactly its import closure."""
    import re

    import yaml
    with open(os.path.join(TOP, "roles", "mig", "vars", "main.yml")) as f:
        listed = set(yaml.safe_load(f)["__mig_module_utils"])
    with open(os.path.join(TOP, "roles", "mig", "templates", "gpuops-mig-restore.j2")) as f:
        script = f.read()
    needed = set()
    for m in re.finditer(r"^from (ansible_collections\.gpuops\.k8s\.plugins\.\S+) import (\w+)", script, re.M):
        for name in (m.group(1), "%s.%s" % (m.group(1), m.group(2))):
            p = _path(name)
            if p:
                needed.add(p)
                needed |= _closure(p)
    needed = {p[len("module_utils/"):] for p in needed if p.startswith("module_utils/") and p != "module_utils/__init__.py"}
    # the packages' __init__.py go with them (as AnsiballZ ships them)
    needed |= {os.path.dirname(p) + "/__init__.py" for p in needed if os.path.dirname(p)}
    assert listed == needed
