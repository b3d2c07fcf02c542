"""Builds for the extension tests, started once per session and overlapped.

Each build has one slow translation unit (torch's headers) that uses one core, so the
setup.py builds run in background processes while the load_inline build runs here.
Builds live in a cache keyed on everything that goes into them (sources, torch_musa's
headers and build code, torch, the driver target): an unchanged tree reuses them
(TORCH_MUSA_EXT_TEST_CACHE, default ~/.cache/torch_musa/ext_tests; 0 disables it).
"""
import concurrent.futures
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
CUDA_CORPUS = REPO / "tests" / "tools" / "corpus" / "cuda_ext"


PKG = REPO / "torch_musa"
KEEP_CACHE_ENTRIES = 3  # about 50 MB each


def build_key(*parts) -> str:
    """Hash of the build inputs: files under the given paths, plus torch, Python, the target."""
    import torch

    from torch_musa.utils.musa_extension import target

    h = hashlib.sha256(f"{torch.__version__} {sys.version} {target()}".encode())
    roots = [*parts, PKG / "include", PKG / "utils" / "musa_extension", PKG / "utils" / "musa_converter.py"]
    for root in roots:
        root = Path(root)
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            h.update(str(f.relative_to(REPO) if REPO in f.parents else f.name).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def cache_root(tmp_path_factory) -> Path:
    env = os.environ.get("TORCH_MUSA_EXT_TEST_CACHE")
    if env == "0":
        return tmp_path_factory.mktemp("musa_ext")
    root = Path(env) if env else Path.home() / ".cache" / "torch_musa" / "ext_tests"
    root.mkdir(parents=True, exist_ok=True)
    entries = sorted(root.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP_CACHE_ENTRIES:]:
        shutil.rmtree(old, ignore_errors=True)
    return root


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MAX_JOBS", "2")
    return env


class SetupBuild:
    """`python setup.py build_ext --inplace` of a project copy, in the background
    (nothing to do when the project's cache entry holds a finished build)."""

    def __init__(self, project: Path, module: str, prepare):
        self.project, self.module = project, module
        self.log = project / "build.log"
        self.proc = None
        self.done = project / "BUILT"
        if self.done.exists():
            return
        shutil.rmtree(project, ignore_errors=True)
        prepare(project)
        self.started = time.time()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=project,
                                         env=_env(), stdout=log, stderr=subprocess.STDOUT)

    def result(self, timeout=900):
        if self.proc is not None:
            rc = self.proc.wait(timeout=timeout)
            text = self.log.read_text()
            assert rc == 0, f"setup.py build of {self.module} failed:\n{text[-6000:]}"
            self.done.write_text(f"{time.time() - self.started:.1f} s\n")
            self.proc = None
        os.utime(self.project.parent)
        so = next(self.project.glob(f"{self.module}*.so"))
        spec = importlib.util.spec_from_file_location(self.module, so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod


    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def convert_cuda_corpus(dst: Path):
    """The CUDA extension after musa-converter, its kernel file renamed .cu -> .mu."""
    from torch_musa.utils import musa_converter

    shutil.copytree(CUDA_CORPUS, dst, ignore=shutil.ignore_patterns("__pycache__", "build", "*.so"))
    report = musa_converter.convert_paths(str(dst), backup=False, progress=False)
    assert report.ok, report.render()
    (dst / "conversion.txt").write_text(report.render())
    (dst / "kernels.cu").rename(dst / "kernels.mu")
    setup_py = dst / "setup.py"
    setup_py.write_text(setup_py.read_text().replace('"kernels.cu"', '"kernels.mu"'))
    return report


@pytest.fixture(scope="session")
def builds(tmp_path_factory):
    """Starts every background build of the session; {name: SetupBuild}."""
    import torch

    if not torch.musa.is_available():
        pytest.skip("no musa device")
    root = cache_root(tmp_path_factory) / build_key(CORPUS, CUDA_CORPUS)
    root.mkdir(parents=True, exist_ok=True)
    started = {
        "corpus": SetupBuild(root / "corpus", "musa_corpus_ext", lambda d: shutil.copytree(CORPUS, d)),
        "root": root,
    }
    # The converted CUDA extension needs musa-converter, which needs libcst (setup installs it; a
    # machine without it skips that one test instead of failing every test of the session).
    try:
        import libcst  # noqa: F401

        started["converted"] = SetupBuild(root / "converted_cuda_ext", "corpus_bias_relu", convert_cuda_corpus)
    except ImportError as e:
        started["converted"] = None
        started["converted_skip"] = f"musa-converter needs libcst: {e}"
    # The load_inline build too (its compilers are subprocesses: a thread is enough).
    started["inline"] = concurrent.futures.ThreadPoolExecutor(1).submit(_inline_build, root)
    yield started
    for b in ("corpus", "converted"):
        if started[b] is not None:
            started[b].stop()


def _inline_build(root):
    from torch_musa.utils.musa_extension import load_inline

    kernels = (CORPUS / "kernels.mu").read_text().replace('#include "corpus_common.muh"',
                                                            (CORPUS / "corpus_common.muh").read_text().replace("#pragma once", ""))
    build_dir = root / "inline"
    build_dir.mkdir(exist_ok=True)
    return load_inline("musa_corpus_inline", (CORPUS / "bindings.inc").read_text(), musa_sources=kernels,
                       functions=["axpy", "row_sum", "softmax", "histogram", "vote", "divergent_barrier", "illegal_write", "atomics", "scan",
                                  "current_stream_handle"],
                       extra_cflags=["-O2"], build_directory=str(build_dir))


@pytest.fixture(scope="module", params=["load_inline", "setup_py"])
def ext(request, builds):
    if request.param == "load_inline":
        return builds["inline"].result(timeout=900)
    if "corpus_mod" not in builds:
        builds["corpus_mod"] = builds["corpus"].result()
    return builds["corpus_mod"]
