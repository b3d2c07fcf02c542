"""Checks the import graph of the torch_musa package (read with ``ast``; nothing is imported).

    python3 scripts/check_import_graph.py

Fails (exit 1, printing the offending imports) on

* an import of the package root from inside the package: ``import torch_musa``,
  ``from torch_musa import <name that is not a submodule>``, a relative ``from .. import x``
  that lands on the root with a non-module name, ``importlib.import_module("torch_musa")``.
  Importing a submodule (``import torch_musa.memory as m``, ``from torch_musa import memory``)
  is fine: the submodule owns what is imported. ``torch_musa/__init__.py`` itself is exempt:
  it is the one place that assembles public names.
* a cycle among the package's modules. Imports at module level and inside functions both are
  edges: a function-level import only postpones the cycle to the first call, where a half-made
  module or an order dependency can still bite, so the graph is kept acyclic either way. The
  edge is to the module named; the implicit import of its parent packages is Python's machinery
  (every submodule needs the root package loaded) and is not an edge.

* a run-time reach into the package root through torch: ``torch.musa.<name>``, ``torch.musa``
  itself, ``torch.get_device_module("musa")``, ``getattr(torch, "musa")``. ``torch.musa`` is the
  root, so such a call is a root import postponed to run time, hidden from the checks above:
  import the module that owns the name. A module whose point is torch's registered device module
  (it hands torch.musa to torch as a whole) is listed in ``scripts/torch_musa_attr_allow.txt``
  (``module  # why``); listed modules that no longer reach it are reported.

A line in ``scripts/import_graph_allow.txt`` (``module -> target``) tolerates one edge still to be
fixed; the file is meant to shrink to nothing, and listed edges that no longer exist are reported.
"""
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "torch_musa"
ALLOW = ROOT / "scripts" / "import_graph_allow.txt"
MUSA_ALLOW = ROOT / "scripts" / "torch_musa_attr_allow.txt"


def package_modules(pkg_dir):
    """Module name -> source path (None for extension modules, which import nothing of ours)."""
    mods = {}
    for path in sorted(pkg_dir.rglob("*")):
        rel = path.relative_to(pkg_dir.parent)
        if "__pycache__" in rel.parts or not path.is_file():
            continue
        if path.suffix == ".py":
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
        elif path.suffix == ".so" and path.name.count(".") > 1:  # _C.cpython-311-...so
            mods[".".join(rel.parent.parts + (path.name.split(".")[0],))] = None
    return mods


def _absolute(module, is_package, level, name):
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module, path, mods):
    """(line, target module, root_violation) for each import in one file."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE:
                    found.append((node.lineno, PACKAGE, f"import {PACKAGE}"))
                elif alias.name.startswith(PACKAGE + "."):
                    found.append((node.lineno, _nearest(alias.name, mods), None))
        elif isinstance(node, ast.ImportFrom):
            src = _absolute(module, is_package, node.level, node.module) if node.level else node.module
            if src != PACKAGE and not (src or "").startswith(PACKAGE + "."):
                continue
            for alias in node.names:
                sub = f"{src}.{alias.name}"
                if sub in mods:
                    found.append((node.lineno, sub, None))
                elif src == PACKAGE:
                    found.append((node.lineno, PACKAGE, f"from {PACKAGE} import {alias.name}"))
                else:
                    found.append((node.lineno, _nearest(src, mods), None))
        elif isinstance(node, ast.Call) and _is_import_module(node):
            arg = node.args[0].value
            if arg == PACKAGE:
                found.append((node.lineno, PACKAGE, f'import_module("{PACKAGE}")'))
            elif arg.startswith(PACKAGE + "."):
                found.append((node.lineno, _nearest(arg, mods), None))
    return found


def _is_torch(node):
    return isinstance(node, ast.Name) and node.id == "torch"


def _is_musa_str(node):
    return isinstance(node, ast.Constant) and node.value == "musa"


def torch_musa_uses(path):
    """(line, what) for each run-time reach into torch.musa in one file."""
    tree = ast.parse(path.read_text(), str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "musa" and _is_torch(node.value):
            parent = parents.get(node)
            found.append((node.lineno, f"torch.musa.{parent.attr}" if isinstance(parent, ast.Attribute)
                          else "torch.musa"))
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "get_device_module" and _is_torch(f.value)
                    and _is_musa_str(node.args[0])):
                found.append((node.lineno, 'torch.get_device_module("musa")'))
            elif (isinstance(f, ast.Name) and f.id == "getattr" and len(node.args) > 1 and _is_torch(node.args[0])
                    and _is_musa_str(node.args[1])):
                found.append((node.lineno, 'getattr(torch, "musa")'))
    return sorted(found)


def _is_import_module(call):
    f = call.func
    named = (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
        isinstance(f, ast.Name) and f.id == "import_module")
    return named and call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)


def _nearest(name, mods):
    """The module a dotted import lands on: itself, or the deepest package that holds it."""
    while name not in mods and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def cycles(graph):
    """Strongly connected components with more than one module (or a self-edge), Tarjan's way."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _allow_lines(path):
    if not path.exists():
        return []
    return [s for s in (line.split("#", 1)[0].strip() for line in path.read_text().splitlines()) if s]


def load_allowed():
    return {tuple(s.strip() for s in line.split("->")) for line in _allow_lines(ALLOW)}


def load_musa_allowed():
    return set(_allow_lines(MUSA_ALLOW))


def check(pkg_dir=ROOT / PACKAGE, allowed=None, musa_allowed=None):
    """Returns the list of problems (strings); empty when the graph is clean."""
    mods = package_modules(pkg_dir)
    allowed = load_allowed() if allowed is None else allowed
    musa_allowed = load_musa_allowed() if musa_allowed is None else musa_allowed
    graph, where, problems, used, musa_used = {}, {}, [], set(), set()
    for module, path in mods.items():
        if path is None:
            continue
        rel = path.relative_to(pkg_dir.parent)
        for line, what in torch_musa_uses(path) if module != PACKAGE else ():  # the root is torch.musa
            if module in musa_allowed:
                musa_used.add(module)
            else:
                problems.append(f"{rel}:{line}: reaches the package root at run time ({what}); import the "
                                f"module that owns the name (torch_musa._core.device, torch_musa.streams, ...) "
                                f"instead, or, where torch's registered module is the point, list {module} in "
                                f"{MUSA_ALLOW.name}")
        for line, target, root_import in imports_of(module, path, mods):
            if (module, target) in allowed:
                used.add((module, target))
                continue
            if root_import and module != PACKAGE:
                problems.append(f"{rel}:{line}: imports the package root ({root_import}); "
                                f"import the submodule that owns the name instead")
            if target != module and module != PACKAGE:  # the root assembles; it is no edge source of a cycle
                graph.setdefault(module, set()).add(target)
                where.setdefault((module, target), f"{rel}:{line}")
    for comp in cycles(graph):
        members = set(comp)
        edges = sorted(f"  {a} -> {b}  ({where[a, b]})" for a in comp for b in graph.get(a, ()) if b in members)
        problems.append("import cycle among " + ", ".join(comp) + ":\n" + "\n".join(edges))
    for src, dst in sorted(allowed - used):
        problems.append(f"{ALLOW.name}: '{src} -> {dst}' is no longer imported; remove the line")
    for module in sorted(musa_allowed - musa_used):
        problems.append(f"{MUSA_ALLOW.name}: '{module}' no longer reaches torch.musa; remove the line")
    return problems


def main():
    problems = check()
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} import-graph problem(s)")
        return 1
    print("torch_musa import graph: no root imports, no cycles, no run-time torch.musa reads outside the allow-list")
    return 0


if __name__ == "__main__":
    sys.exit(main())
