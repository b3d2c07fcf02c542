#!/usr/bin/env python3
"""Checks that the torch_musa module paths and names Moore Threads' torch_musa programs use
resolve in this package.

It parses every Python file of a checkout of their repository (tests, benchmarks, tools and the
package itself) and collects each ``import torch_musa.X``, ``from torch_musa.X import a`` and
attribute chain ``torch_musa.X.a`` (also through names bound by those imports, as in
``from torch_musa import testing; testing.get_musa_arch()``). Each reference then has to resolve
here: modules import, names are attributes or submodules.

    python3 scripts/check_module_surface.py [--repo DIR] [--write tests/core/module_surface.txt]

``--repo`` is a git directory (read at HEAD, no work tree needed) or a plain folder. ``--write``
stores the references in the list tests/core/test_module_paths.py checks, so CI needs no mirror.
Exit status: 0 when everything resolves, 1 otherwise (each unresolved reference printed).
"""
import argparse
import ast
import importlib
import os
import subprocess
import sys
from collections import defaultdict

DEFAULT_REPO = "/work/.mirror/MooreThreads+torch_musa/repo"

# References not checked, each with the reason. `_MUSAC` is their C++ extension: its
# bindings are called by their own package's Python wrappers (the public surface checked
# here), so a program reaching into it names an implementation detail, not an API.
EXCLUDED_PREFIXES = {
    "torch_musa._MUSAC": "their C++ extension's bindings (the Python functions over them are checked)",
    "torch_musa.setup_helpers": "their build scripts (setup.py helpers), not installed API",
    "torch_musa.__file__": "a module attribute every module has",
}

# Reasons shared by several KNOWN_MISSING entries.
_GRAPH_TREES = "their Inductor graph-tree port; musa graph trees run on torch's own (torch_musa/gates/graph_trees.py)"
_AO = ("named only inside their core/ao package: fused Conv+SiLU modules over their own quantized kernels "
       "(quantized::conv2d_silu); torch has none to run them")
_INTEGRATION = ("their BERT/ResNet integration harness (~800 lines over downloaded data sets and weights): "
                "nothing here to run it on")

# References that do not resolve yet, each with the reason; tests/core/test_module_paths.py
# asserts exactly these are missing, so an implemented one must leave this list.
KNOWN_MISSING = {
    "torch_musa._inductor.musagraph_trees": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_trees.get_manager": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_trees.mark_step_begin": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_trees.musagraphify_impl": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_trees.reset_musagraph_trees": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.BoxedDeviceIndex": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.CheckInvariantStatus": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.CheckInvariantStatus.ExpectedDeadIndicesBeforeGraphMismatch": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.CheckInvariantStatus.MusagraphManagedIdxMismatch": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.CheckInvariantStatus.SUCCESS": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.CheckInvariantStatus.StaticInputIdxMismatch": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.FunctionID": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.ModelType": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.OutputType": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.PlaceholderInfo": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.WrappedFunction": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.check_for_mutation": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.check_multiple_devices_or_any_cpu_nodes": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.format_default_skip_message": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.get_mutation_stack_trace": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.get_placeholder_info": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.log_data_ptr_mismatch": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.log_musagraph_skip_and_bump_counter": _GRAPH_TREES,
    "torch_musa._inductor.musagraph_utils.maybe_warning_due_to_dynamic_shape": _GRAPH_TREES,
    "torch_musa.core.ao.nn.intrinsic.ConvAddSiLU2d": _AO,
    "torch_musa.core.ao.nn.intrinsic.ConvBnSiLU2d": _AO,
    "torch_musa.core.ao.nn.intrinsic.ConvSiLU2d": _AO,
    "torch_musa.testing.integration.Assertion": _INTEGRATION,
    "torch_musa.testing.integration.EvalConfig": _INTEGRATION,
    "torch_musa.testing.integration.EvalIntegration": _INTEGRATION,
    "torch_musa.testing.integration.IntegrationConfig": _INTEGRATION,
    "torch_musa.testing.integration.JaccardScoreGreaterThan": _INTEGRATION,
    "torch_musa.testing.integration.JaccardSimilarityCoefficient": _INTEGRATION,
    "torch_musa.testing.integration.Metric": _INTEGRATION,
    "torch_musa.testing.integration.Top1AccuracyGreaterThan": _INTEGRATION,
    "torch_musa.testing.integration.Top5AccuracyGreaterThan": _INTEGRATION,
    "torch_musa.testing.integration.TopKAccuary": _INTEGRATION,
    "torch_musa.testing.integration.TrainConfig": _INTEGRATION,
    "torch_musa.testing.integration.TrainIntegration": _INTEGRATION,
    "torch_musa.testing.integration.default_strategies_list": _INTEGRATION,
    "torch_musa.testing.integration.utils.check_existent_directory": _INTEGRATION,
    "torch_musa.testing.integration.utils.check_existent_file": _INTEGRATION,
    "torch_musa.testing.integration.utils.get_dataset_root_dir": _INTEGRATION,
    "torch_musa.testing.integration.utils.get_model_root_dir": _INTEGRATION,
}


def _is_ours(name: str) -> bool:
    return name == "torch_musa" or name.startswith("torch_musa.")


def _list_sources(repo: str):
    """(path, text) of each .py file: from git HEAD when ``repo`` is a git directory."""
    if os.path.isdir(os.path.join(repo, "objects")) or os.path.isdir(os.path.join(repo, ".git")):
        names = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD"],
                               capture_output=True, text=True, check=True).stdout.split("\n")
        names = [n for n in names if n.endswith(".py")]
        blobs = subprocess.run(["git", "-C", repo, "cat-file", "--batch"], capture_output=True, check=True,
                               input="".join(f"HEAD:{n}\n" for n in names).encode()).stdout
        pos = 0
        for name in names:  # --batch output: "<sha> blob <size>\n<bytes>\n" per file
            header_end = blobs.index(b"\n", pos)
            size = int(blobs[pos:header_end].split()[2])
            yield name, blobs[header_end + 1:header_end + 1 + size].decode("utf-8", "replace")
            pos = header_end + 2 + size
        return
    for root, _, files in os.walk(repo):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    yield os.path.relpath(path, repo), fh.read()


def _attribute_chain(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, parts[::-1]) if isinstance(node, ast.Name) else (None, None)


def references_in(text: str):
    """The dotted torch_musa references one source file makes."""
    tree = ast.parse(text)
    bound = {}  # local name -> the torch_musa path it stands for
    refs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_ours(alias.name):
                    refs.add(alias.name)
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound["torch_musa"] = "torch_musa"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_ours(node.module):
            for alias in node.names:
                if alias.name == "*":
                    refs.add(node.module)
                    continue
                refs.add(f"{node.module}.{alias.name}")
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    chains = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            root, parts = _attribute_chain(node)
            if root in bound:
                chains.add(".".join([bound[root]] + parts))
    # only the longest chains: torch_musa.a.b covers torch_musa.a
    refs |= {c for c in chains if not any(o.startswith(c + ".") for o in chains)}
    return refs


def collect(repo: str):
    """{reference: sorted files using it} over the repository, exclusions removed."""
    found = defaultdict(set)
    for path, text in _list_sources(repo):
        try:
            refs = references_in(text)
        except SyntaxError:
            continue  # Python 2 or template files: nothing a program imports
        for ref in refs:
            if not any(ref == p or ref.startswith(p + ".") for p in EXCLUDED_PREFIXES):
                found[ref].add(path)
    return {ref: sorted(files) for ref, files in sorted(found.items())}


def resolve(ref: str):
    """The object ``ref`` names here: the longest importable module prefix, then attributes
    (or submodules) of it. Raises ImportError/AttributeError naming what is missing."""
    parts = ref.split(".")
    obj = importlib.import_module(parts[0])
    path = parts[0]
    for part in parts[1:]:
        path = f"{path}.{part}"
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(path)
        except ModuleNotFoundError as e:
            if e.name != path:
                raise
            raise AttributeError(f"{path}: no such attribute or module") from None
    return obj


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=DEFAULT_REPO, help="their repository (git dir or folder)")
    parser.add_argument("--write", metavar="FILE", help="store the references (one a line) in FILE")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.repo):
        print(f"no repository at {args.repo}: pass --repo with a checkout of MooreThreads/torch_musa")
        return 2
    found = collect(args.repo)
    missing = []
    for ref, files in found.items():
        try:
            resolve(ref)
        except Exception as e:  # noqa: BLE001 - any failure to resolve is a finding
            missing.append((ref, files, f"{type(e).__name__}: {e}"))
    for ref, files, why in missing:
        if ref in KNOWN_MISSING:
            why = f"known: {KNOWN_MISSING[ref]}"
        print(f"MISSING {ref}  ({why})  used in {files[0]}" + (f" +{len(files) - 1}" if len(files) > 1 else ""))
    print(f"{len(found) - len(missing)}/{len(found)} references resolve")
    if args.write:
        with open(args.write, "w") as fh:
            fh.write("# torch_musa references in MooreThreads/torch_musa's sources;\n"
                     "# written by scripts/check_module_surface.py --write, checked by test_module_paths.py\n")
            fh.writelines(f"{ref}\n" for ref in found)
    return 1 if any(ref not in KNOWN_MISSING for ref, _, _ in missing) else 0


if __name__ == "__main__":
    sys.exit(main())
