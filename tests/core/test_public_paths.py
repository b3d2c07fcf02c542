"""Every public import path torch_musa had when public_paths.txt was written still resolves, and paths
that led to one object still lead to one object (the package's internal layout may change beneath them).
The list is scripts/list_public_paths.py's output; regenerate it only when a public name is added."""
import collections
import importlib
import importlib.util
from pathlib import Path

import pytest
import torch

import torch_musa

LIST = Path(__file__).with_name("public_paths.txt")


def _rows():
    return [tuple(line.split("\t")) for line in LIST.read_text().splitlines() if line]


def _module(path):
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as e:
        if e.name and not e.name.startswith("torch_musa"):  # an optional dependency of a tool module
            pytest.skip(f"{path} needs {e.name}")
        raise


class VersionGated(Exception):
    """A name this torch no longer backs: torch_musa raises an ImportError that says so (e.g. the
    profiler's TorchTidy adapters on torch >= 2.15, whose torch side was removed)."""


def _resolve(path, name):
    mod = _module(path)
    if name == "-":
        return mod
    try:
        return getattr(mod, name)
    except ImportError as e:
        raise VersionGated(str(e)) from e
    except AttributeError:  # a submodule loaded on demand (torch_musa.utils, ...)
        if importlib.util.find_spec(f"{path}.{name}") is None:
            raise
        return _module(f"{path}.{name}")


def _via_torch_musa_attr(path, name):
    """The same path spelled torch.musa.<...>, walked attribute by attribute."""
    obj, parts = torch.musa, path.split(".")
    for i, part in enumerate(parts[1:], start=1):
        # a module only in sys.modules (torch_musa.musa_graph.graphs) is reached by importing it
        obj = getattr(obj, part) if hasattr(obj, part) else _resolve(".".join(parts[:i]), part)
    if name == "-":
        return obj
    # a tool submodule (torch_musa.run) is an attribute only once something imported it
    return getattr(obj, name) if hasattr(obj, name) else _resolve(path, name)


ROWS = _rows()


def test_list_is_not_empty():
    assert len(ROWS) > 500 and ("torch_musa", "memory_allocated") in {r[:2] for r in ROWS}


@pytest.mark.parametrize("path", sorted({r[0] for r in ROWS}))
def test_every_public_name_resolves(path):
    rows = [r for r in ROWS if r[0] == path]
    missing = []
    for _, name, _key in rows:
        try:
            _resolve(path, name)
        except VersionGated as e:
            assert "torch" in str(e), e  # the error names the torch version that lacks it
        except AttributeError:
            missing.append(name)
    assert not missing, f"{path} lost public names: {missing}"


def test_paths_that_shared_an_object_still_share_it():
    groups = collections.defaultdict(list)
    for path, name, key in ROWS:
        if key != "=":
            groups[key].append((path, name))
    split = {}
    for key, places in groups.items():
        objs = {}
        for path, name in places:
            try:
                objs.setdefault(id(_resolve(path, name)), []).append(f"{path}.{name}")
            except (pytest.skip.Exception, VersionGated):
                continue
        if len(objs) > 1:
            split[key] = list(objs.values())
    assert not split, f"paths that led to one object now lead to several: {split}"


def test_torch_musa_and_torch_dot_musa_are_one_namespace():
    assert torch.musa is torch_musa
    differ = []
    for path, name, key in ROWS:
        if key == "=" or path.split(".")[1:2] in (["testing"], ["utils"], ["run"]):
            continue  # tool modules: reached as torch_musa.<tool>, loaded on demand
        try:
            if _via_torch_musa_attr(path, name) is not _resolve(path, name):
                differ.append(f"{path}.{name}")
        except (VersionGated, ImportError):  # torch_musa's ImportError naming the torch that lacks it
            continue
    assert not differ, f"torch.musa.<path> is not torch_musa.<path> for: {differ}"
