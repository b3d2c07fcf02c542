"""Helpers for the porting/accuracy tool tests.

Tests that need the musa device use the ``musa`` fixture: it skips (with the
import error as reason) only while ``import torch_musa`` fails, so they run as
soon as the core package is importable.  The converter tests load the converter
straight from its file: it needs neither torch nor the core package.
"""
import importlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
CORPUS_SCRIPTS = ["train_amp.py", "train_ddp.py", "env_streams.py", "build_ext.py"]


def load_tool(name):
    """torch_musa/utils/<name>.py, loaded from its file under a private name."""
    mod_name = f"_tools_test_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, REPO / "torch_musa" / "utils" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


def _core_status():
    try:
        import torch  # noqa: F401

        mod = importlib.import_module("torch_musa")
    except Exception as e:  # ImportError, or RuntimeError from torch's autoload
        return f"torch_musa core package does not import yet: {type(e).__name__}: {e}"
    if getattr(mod, "__file__", None) is None:
        return "torch_musa core package is not present yet (only the tools are)"
    import torch

    if not hasattr(torch, "musa"):
        return "torch_musa imported but did not register torch.musa"
    return None


CORE_MISSING = _core_status()


@pytest.fixture
def musa():
    """The torch.musa module; skips while the core package cannot be imported."""
    if CORE_MISSING:
        pytest.skip(CORE_MISSING)
    import torch

    if not torch.musa.is_available():
        pytest.skip("torch_musa imports but reports no musa device")
    return torch.musa


def subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_python(args, cwd=None, timeout=600, **env):
    """Run ``python args...``; returns CompletedProcess with text output."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=str(cwd) if cwd else None,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def extensions_dir(tmp_path_factory):
    """Shared TORCH_EXTENSIONS_DIR so the corpus extension is compiled once per session."""
    return tmp_path_factory.mktemp("torch_extensions")
