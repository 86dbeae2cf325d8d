# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module_utils layout (docs/architecture.md): no import circle between files or folders, arrows point down
the layers only, read-only modules ship no simulator mutations, files stay small."""
import ast
import os

from ansible_collections.gpuops.k8s.plugins.module_utils.sim import api as nvml_sim

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PLUGINS = os.path.join(TOP, "plugins")
PREFIX = "ansible_collections.gpuops.k8s.plugins."


def _path(dotted, root=PLUGINS):
    """plugins-relative file of a dotted name under ansible_collections.gpuops.k8s.plugins, or None."""
    rel = dotted[len(PREFIX):].replace(".", os.sep)
    for cand in (rel + ".py", os.path.join(rel, "__init__.py")):
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def _absolute(rel, node):
    """The dotted module of an ``ImportFrom`` in plugins file ``rel``: relative ones (``from ..plan import x``)
    resolved against the file's package, as Python does; None when it climbs out of plugins/."""
    if not node.level:
        return node.module
    package = (PREFIX + os.path.dirname(rel).replace(os.sep, ".")).split(".")
    if len(package) - (node.level - 1) < PREFIX.count("."):
        return None
    base = package[:len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(rel, root=PLUGINS):
    """Files a plugins file imports (every import statement, also those inside functions, as AnsiballZ sees them;
    relative imports resolved)."""
    with open(os.path.join(root, rel)) as f:
        tree = ast.parse(f.read())
    out = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(rel, node)
            if module:
                names = [module] + ["%s.%s" % (module, a.name) for a in node.names]
        for name in names:
            if name.startswith(PREFIX):
                p = _path(name, root)
                if p and p != rel:
                    out.add(p)
    return out


def _graph(root=PLUGINS):
    graph = {}
    for base, _dirs, files in os.walk(os.path.join(root, "module_utils")):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(base, f), root)
                graph[rel] = {d for d in _imports(rel, root) if not d.endswith("__init__.py")}
    return graph


# module_utils folders, bottom to top (docs/architecture.md, "Layers"): a file may import its own folder and the
# folders of the layers below it only.
LAYERS = [("common",), ("catalog",), ("report", "tenancy"), ("metrics", "nvml", "sim"), ("health", "host", "k8s", "mig"),
          ("plan",), ("whatif",)]
# The one documented seam: the factory (reads) and writable (changes) open the simulator, which builds on the
# NVML layer's errors and backend interface below both backends.
SEAM = {("nvml", "sim"): {"nvml/factory.py", "nvml/writable.py"},
        ("sim", "nvml"): {"sim/%s" % f for f in ("configure.py", "mig_reader.py", "reader.py", "writer.py", "state.py")}}
SEAM_TARGETS = {("nvml", "sim"): {"sim/reader.py", "sim/writer.py"}, ("sim", "nvml"): {"nvml/errors.py", "nvml/backend.py"}}


def _folder(rel):
    """``module_utils/k8s/labels.py`` -> ``k8s``."""
    return rel.split(os.sep)[1]


def _folder_arrows(root=PLUGINS):
    """{(from folder, to folder): [(file, imported file)]} over module_utils, the seam included."""
    arrows = {}
    for rel, deps in _graph(root).items():
        for dep in deps:
            if dep.startswith("module_utils" + os.sep) and _folder(dep) != _folder(rel):
                arrows.setdefault((_folder(rel), _folder(dep)), []).append((rel, dep))
    return arrows


def _closure(start):
    seen, todo = set(), [start]
    while todo:
        cur = todo.pop()
        for dep in _imports(cur):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def _cycles(graph):
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
    return cycles


def _upward(root=PLUGINS):
    """``["from -> to"]``: module_utils imports that do not point down the layers (the seam excepted)."""
    rank = dict((folder, i) for i, layer in enumerate(LAYERS) for folder in layer)
    upward = []
    for (src, dst), pairs in sorted(_folder_arrows(root).items()):
        for rel, dep in pairs:
            rel_in, dep_in = rel[len("module_utils/"):], dep[len("module_utils/"):]
            if (src, dst) in SEAM and rel_in in SEAM[(src, dst)] and dep_in in SEAM_TARGETS[(src, dst)]:
                continue
            if rank[dst] >= rank[src]:
                upward.append("%s -> %s" % (rel_in, dep_in))
    return sorted(upward)


def test_no_import_circle_in_module_utils():
    assert _cycles(_graph()) == []
    # the old circle: nvml <-> simulator; now errors and the backend interface sit below both backends
    assert "module_utils/sim/reader.py" not in _closure("module_utils/nvml/errors.py")
    assert "module_utils/nvml/factory.py" not in _closure("module_utils/sim/writer.py")


def test_folders_import_only_the_layers_below():
    rank = dict((folder, i) for i, layer in enumerate(LAYERS) for folder in layer)
    folders = sorted(d for d in os.listdir(os.path.join(PLUGINS, "module_utils"))
                     if os.path.isdir(os.path.join(PLUGINS, "module_utils", d)) and d != "__pycache__")
    assert sorted(rank) == folders, "every module_utils folder has a layer in LAYERS and docs/architecture.md"
    assert _upward() == []


def _tree(tmp_path, files):
    """A plugins/ tree of ``{relative path: source}`` (packages get an empty __init__.py)."""
    root = tmp_path / "plugins"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for d in [path.parent] + list(path.parent.parents):
            if d == root:
                break
            if not (d / "__init__.py").exists():
                (d / "__init__.py").write_text("")
        path.write_text(text)
    return str(root)


MU = "from ansible_collections.gpuops.k8s.plugins.module_utils"


def test_the_checkers_reject_known_bad_trees(tmp_path):
    """The layout checks can fail: upward imports written absolute, relative (``from ..plan import solver``,
    ``from ...module_utils.whatif.runner import run``, inside a function), a same-layer arrow, and an import circle;
    downward ones, absolute or relative, pass."""
    root = _tree(tmp_path, {
        "module_utils/plan/solver.py": MU + ".common.errors import GpuOpsError\nfrom ..catalog import gpus\n",
        "module_utils/common/errors.py": "class GpuOpsError(Exception):\n    pass\n",
        "module_utils/common/validation.py": "from . import errors\nfrom .errors import GpuOpsError\n",
        "module_utils/catalog/gpus.py": "from ..common.errors import GpuOpsError\n",
        "module_utils/common/bad_relative.py": "from ..plan import solver\n",
        "module_utils/common/bad_deep.py": "def f():\n    from ...module_utils.whatif.runner import run\n",
        "module_utils/common/bad_absolute.py": "import ansible_collections.gpuops.k8s.plugins.module_utils.k8s.rollout\n",
        "module_utils/whatif/runner.py": "from .loop import x\n",
        "module_utils/whatif/loop.py": "from .runner import run\n",
        "module_utils/k8s/rollout.py": "",
        "module_utils/mig/plan.py": "from ..health import checks\n",
        "module_utils/health/checks.py": "",
    })
    assert _imports("module_utils/common/validation.py", root) == {"module_utils/common/errors.py",
                                                                   "module_utils/common/__init__.py"}
    assert _upward(root) == ["common/bad_absolute.py -> k8s/rollout.py", "common/bad_deep.py -> whatif/runner.py",
                             "common/bad_relative.py -> plan/solver.py", "mig/plan.py -> health/checks.py"]
    cycles = [sorted(set(c)) for c in _cycles(_graph(root))]
    assert cycles == [["module_utils/whatif/loop.py", "module_utils/whatif/runner.py"]]
    # the same tree without the bad files passes both checks
    for rel in ("common/bad_relative.py", "common/bad_deep.py", "common/bad_absolute.py", "mig/plan.py",
                "whatif/loop.py"):
        os.remove(os.path.join(root, "module_utils", rel))
    assert _upward(root) == [] and _cycles(_graph(root)) == []


def test_each_folder_sits_right_above_what_it_imports():
    """The layers are drawn from the imports (python3 hack/import_layers.py --table prints them): a folder is one
    layer above the highest folder it imports (folders that import nothing of module_utils: layer 1), so no layer is
    drawn that the imports do not need. The seam's two folders share their layer."""
    rank = dict((folder, i + 1) for i, layer in enumerate(LAYERS) for folder in layer)
    group = {"sim": "nvml"}
    needs = {}
    for (src, dst), _pairs in _folder_arrows().items():
        if group.get(src, src) != group.get(dst, dst):
            needs.setdefault(group.get(src, src), set()).add(rank[dst])
    misplaced = []
    for folder in rank:
        want = 1 + max(needs.get(group.get(folder, folder), {0}))
        if rank[folder] != want:
            misplaced.append("%s: layer %d, its imports put it at %d" % (folder, rank[folder], want))
    assert misplaced == []


def test_no_two_way_folder_arrow_but_the_seam():
    arrows = _folder_arrows()
    two_way = sorted((a, b) for (a, b) in arrows if a < b and (b, a) in arrows)
    assert two_way == [("nvml", "sim")]


def test_the_architecture_page_lists_the_layers():
    """docs/architecture.md says the same layers as LAYERS, in one line per layer under its "Layers" heading."""
    with open(os.path.join(TOP, "docs", "architecture.md")) as f:
        text = f.read()
    listed = []
    for line in text.split("<!-- layers -->")[1].split("<!-- /layers -->")[0].splitlines():
        if line.startswith("| ") and not line.startswith("| layer") and not line.startswith("|---"):
            listed.append(tuple(name.strip(" `/") for name in line.split("|")[2].split(",")))
    assert listed == LAYERS[::-1]


def test_no_file_in_plugins_over_700_lines():
    sizes = {}
    for root, _dirs, files in os.walk(PLUGINS):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(root, f)) as fh:
                    sizes[os.path.relpath(os.path.join(root, f), PLUGINS)] = sum(1 for _line in fh)
    assert [(f, n) for f, n in sizes.items() if n > 700] == []


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


def test_unit_tests_mirror_the_source_tree():
    """tests/unit/plugins/module_utils/<folder>/ holds the tests of plugins/module_utils/<folder>/ (only the layout
    tests, which read the whole tree, sit at the top)."""
    here = os.path.dirname(os.path.abspath(__file__))
    flat = sorted(f for f in os.listdir(here) if f.startswith("test_") and f.endswith(".py"))
    assert flat == ["test_layout.py"]
    folders = sorted(d for d in os.listdir(here) if os.path.isdir(os.path.join(here, d)) and not d.startswith(("_", ".")))
    sources = set(d for d in os.listdir(os.path.join(PLUGINS, "module_utils")) if not d.startswith(("_", ".")))
    assert [d for d in folders if d not in sources] == []
