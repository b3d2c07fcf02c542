"""Lists torch_musa's public import paths and the objects they lead to.

    python3 scripts/list_public_paths.py            # print
    python3 scripts/list_public_paths.py --write    # write tests/core/public_paths.txt

Each line is ``module<TAB>name<TAB>key``. ``name`` is ``-`` for the module itself. ``key`` names
the object: two lines with the same key led to the same object when the list was written (the
key is only a label: the first path's spelling), so a restructuring that keeps public paths must
keep them resolving to one object. ``=`` marks plain values (numbers, strings), checked only to
resolve. tests/core/test_public_paths.py checks the current tree against the written list.
"""
import importlib
import pkgutil
import sys
import types
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "core" / "public_paths.txt"
PLAIN = (int, float, complex, str, bytes, bool, type(None))


def _public(path):
    return not any(part.startswith("_") for part in path.split("."))


def public_modules():
    """torch_musa and its public submodules, files and the aliases the package installs."""
    import torch_musa

    names = {"torch_musa"}
    for info in pkgutil.walk_packages(torch_musa.__path__, "torch_musa."):
        if _public(info.name) and not info.name.endswith("__main__"):
            names.add(info.name)
    found = {}
    for name in sorted(names):
        try:
            found[name] = importlib.import_module(name)
        except ImportError as e:  # an optional dependency (libcst, ...) is missing here
            print(f"skipped {name}: {e}", file=sys.stderr)
    for name, mod in list(sys.modules.items()):
        if name.startswith("torch_musa.") and _public(name) and isinstance(mod, types.ModuleType):
            found.setdefault(name, mod)
    return found


def _label(obj, where):
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    qual = getattr(obj, "__qualname__", None)
    mod = getattr(obj, "__module__", None)
    if isinstance(qual, str) and isinstance(mod, str) and (callable(obj) or isinstance(obj, type)):
        return f"{mod}.{qual}"
    return where


def _foreign(obj):
    """A module's helper imports (sys, typing.Any, contextlib.contextmanager): not its API."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
    elif callable(obj) or isinstance(obj, type):
        name = getattr(obj, "__module__", None) or ""
    else:
        return False
    return not (name == "torch" or name.startswith(("torch.", "torch_musa", "torch._")))


def public_names(mod):
    exported = {n for n in getattr(mod, "__all__", ()) if isinstance(n, str)}
    names = {n for n in dir(mod) if not n.startswith("_") and not _foreign(getattr(mod, n, None))}
    return sorted(names | exported)


def rows():
    keys = {}  # id(obj) -> key
    taken = set()
    out = []

    def key_of(obj, where):
        if isinstance(obj, PLAIN):
            return "="
        if id(obj) not in keys:
            key, n = _label(obj, where), 2
            while key in taken:  # two objects that spell alike (wrappers, dynamic classes)
                key, n = f"{_label(obj, where)}#{n}", n + 1
            keys[id(obj)] = key
            taken.add(key)
        return keys[id(obj)]

    mods = public_modules()
    for path, mod in sorted(mods.items()):
        out.append((path, "-", key_of(mod, path)))
        for name in public_names(mod):
            try:
                obj = getattr(mod, name)
            except AttributeError:  # listed in __all__ but not provided on this torch
                continue
            out.append((path, name, key_of(obj, f"{path}.{name}")))
    return out


def main():
    lines = ["\t".join(r) for r in rows()]
    text = "".join(line + "\n" for line in lines)
    if "--write" in sys.argv:
        OUT.write_text(text)
        print(f"wrote {len(lines)} lines to {OUT}")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
