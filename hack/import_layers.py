# Copyright: gpuops.k8s contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The module_utils import graph, folder by folder, and the fewest layers it needs (docs/architecture.md, "Layers").

    python3 hack/import_layers.py            # the folder arrows and the layers, top first
    python3 hack/import_layers.py --table    # the <!-- layers --> table's first two columns, to compare with the doc
    python3 hack/import_layers.py --dot      # the folder graph for Graphviz (dot -Tsvg)

Every import statement counts, also those inside functions (AnsiballZ ships what they name). The one seam
(nvml/factory and nvml/writable open the simulator, which builds on nvml/errors and nvml/backend) makes nvml/ and
sim/ one layer. A folder's layer is one above the highest layer it imports: the longest import path below it.
Standard library only; reads the tree, changes nothing.
"""
import ast
import os
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MU = os.path.join(TOP, "plugins", "module_utils")
PREFIX = "ansible_collections.gpuops.k8s.plugins.module_utils."
SEAM = {"nvml": "nvml", "sim": "nvml"}  # folders that share one layer (the documented seam)


def folders():
    return sorted(d for d in os.listdir(MU) if os.path.isdir(os.path.join(MU, d)) and not d.startswith(("_", ".")))


def arrows():
    """{folder: {folders it imports}} (its own folder left out)."""
    out = dict((f, set()) for f in folders())
    for folder in out:
        for root, _dirs, files in os.walk(os.path.join(MU, folder)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                with open(os.path.join(root, name)) as fh:
                    tree = ast.parse(fh.read())
                for node in ast.walk(tree):
                    mods = []
                    if isinstance(node, ast.Import):
                        mods = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.module:
                        mods = [node.module]
                    for mod in mods:
                        if mod.startswith(PREFIX):
                            dst = mod[len(PREFIX):].split(".")[0]
                            if dst != folder and dst in out:
                                out[folder].add(dst)
    return out


def layers(graph):
    """[[folders of layer 1], [layer 2], ...] bottom first: a folder one layer above the highest it imports."""
    group = dict((f, SEAM.get(f, f)) for f in graph)
    deps = {}
    for src, dsts in graph.items():
        deps.setdefault(group[src], set()).update(group[d] for d in dsts if group[d] != group[src])
    rank = {}

    def level(g, seen=()):
        if g in seen:
            raise SystemExit("import circle between folders: %s" % " -> ".join(seen + (g,)))
        if g not in rank:
            rank[g] = 1 + max([level(d, seen + (g,)) for d in deps.get(g, ())] or [0])
        return rank[g]

    for g in deps:
        level(g)
    out = [[] for dummy in range(max(rank.values()))]
    for f in sorted(graph):
        out[rank[group[f]] - 1].append(f)
    return out


def main(argv):
    graph = arrows()
    found = layers(graph)
    if "--dot" in argv:
        print("digraph module_utils {\n  rankdir=BT;")
        for src in sorted(graph):
            for dst in sorted(graph[src]):
                print('  "%s" -> "%s";' % (src, dst))
        print("}")
        return 0
    if "--table" in argv:
        for i in range(len(found), 0, -1):
            print("| %d | %s |" % (i, ", ".join("`%s/`" % f for f in found[i - 1])))
        return 0
    print("folder arrows (what each module_utils folder imports):")
    for src in sorted(graph):
        print("  %-8s -> %s" % (src, ", ".join(sorted(graph[src])) or "-"))
    print("%d layers, top first:" % len(found))
    for i in range(len(found), 0, -1):
        print("  %d  %s" % (i, ", ".join(found[i - 1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
