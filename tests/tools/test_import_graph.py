"""scripts/check_import_graph.py: no torch_musa module imports the package root (nor reads torch.musa at run time
unless allow-listed), no import cycles."""
import importlib.util
import textwrap
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_import_graph.py"
_spec = importlib.util.spec_from_file_location("check_import_graph", _SCRIPT)
checker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(checker)


def test_torch_musa_import_graph_is_clean():
    problems = checker.check()
    assert not problems, "\n".join(problems)


def _package(tmp_path, files):
    pkg = tmp_path / "torch_musa"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return pkg


@pytest.mark.parametrize("text, shown", [
    ("import torch_musa\n", "import torch_musa"),
    ("def f():\n    from torch_musa import current_device\n", "from torch_musa import current_device"),
    ("from .. import current_device\n", "from torch_musa import current_device"),
    ("import importlib\nimportlib.import_module('torch_musa')\n", 'import_module("torch_musa")'),
])
def test_root_imports_are_reported(tmp_path, text, shown):
    pkg = _package(tmp_path, {"__init__.py": "from . import sub\n", "sub/__init__.py": "", "sub/mod.py": text})
    problems = checker.check(pkg, allowed=set(), musa_allowed=set())
    assert len(problems) == 1 and "sub/mod.py" in problems[0] and shown in problems[0]


def test_submodule_imports_are_fine(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "import torch_musa.b as b\nfrom torch_musa import c\n",
                              "b.py": "from . import c\n", "c.py": "from .sub import d\n", "sub/__init__.py": "",
                              "sub/d.py": "import torch\n"})
    assert checker.check(pkg, allowed=set(), musa_allowed=set()) == []


def test_cycles_are_reported_with_their_edges(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "from . import b\n",
                              "b.py": "def f():\n    from .sub import c\n", "sub/__init__.py": "",
                              "sub/c.py": "from .. import a\n"})
    problems = checker.check(pkg, allowed=set(), musa_allowed=set())
    assert len(problems) == 1 and "torch_musa.a, torch_musa.b, torch_musa.sub.c" in problems[0]
    assert "torch_musa.b -> torch_musa.sub.c  (torch_musa/b.py:2)" in problems[0]


def test_allowed_edges_are_tolerated_and_stale_ones_reported(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "import torch_musa\n"})
    assert checker.check(pkg, allowed={("torch_musa.a", "torch_musa")}, musa_allowed=set()) == []
    stale = checker.check(pkg, allowed={("torch_musa.a", "torch_musa.zz")}, musa_allowed=set())
    assert "no longer imported" in stale[-1]


@pytest.mark.parametrize("text, shown", [
    ("import torch\ndef f():\n    return torch.musa.current_device()\n", "torch.musa.current_device"),
    ("import torch\nmusa = torch.musa\n", "(torch.musa)"),
    ("import torch\ndef f():\n    return torch.get_device_module('musa').Event\n", 'torch.get_device_module("musa")'),
    ("import torch\nm = getattr(torch, 'musa')\n", 'getattr(torch, "musa")'),
])
def test_run_time_reads_of_torch_musa_are_reported(tmp_path, text, shown):
    pkg = _package(tmp_path, {"__init__.py": "import torch\nx = torch.musa.device\n", "a.py": text})
    problems = checker.check(pkg, allowed=set(), musa_allowed=set())
    assert len(problems) == 1 and "a.py" in problems[0] and shown in problems[0]  # the root is exempt


def test_torch_musa_in_strings_and_other_devices_is_fine(tmp_path):
    text = ('"""Like torch.musa.current_device()."""\nimport torch\n'
            'def f():\n    return f"torch.musa.{1}", torch.get_device_module("cuda"), torch.cuda.Event\n')
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": text})
    assert checker.check(pkg, allowed=set(), musa_allowed=set()) == []


def test_allow_listed_torch_musa_readers_are_tolerated_and_stale_ones_reported(tmp_path):
    pkg = _package(tmp_path, {"__init__.py": "", "a.py": "import torch\nm = torch.musa\n", "b.py": ""})
    assert checker.check(pkg, allowed=set(), musa_allowed={"torch_musa.a"}) == []
    problems = checker.check(pkg, allowed=set(), musa_allowed={"torch_musa.a", "torch_musa.b"})
    assert problems == ["torch_musa_attr_allow.txt: 'torch_musa.b' no longer reaches torch.musa; remove the line"]
