"""Builds for the extension tests, started once per session and overlapped.

Each build has one slow translation unit (torch's headers) that uses one core, so the
builds run as background processes (setup.py for the corpus and the converted CUDA
extension, load_inline in `build_inline.py`) while the tests that need none run.
Builds live in a cache keyed on everything that goes into them (sources, torch_musa's
headers and build code, torch, the driver target): an unchanged tree reuses them
(TORCH_MUSA_EXT_TEST_CACHE, default ~/.cache/torch_musa/ext_tests; 0 disables it).
A build gets TORCH_MUSA_EXT_BUILD_TIMEOUT seconds (default 900).

A build is a process, never a thread, so one that overruns its time is killed and the
session still ends (an executor thread stuck in a build keeps pytest from exiting).
Sessions building the same cache entry take turns on a kernel file lock; whoever holds
it knows that a torch build lock left in the entry belongs to a killed build, and
removes it (torch waits on such a file for ever).
"""
import fcntl
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
# Each build takes 30-60 s on 2 cores with a cold compiler cache.
BUILD_TIMEOUT_S = float(os.environ.get("TORCH_MUSA_EXT_BUILD_TIMEOUT", 900))
LOCK_TIMEOUT_S = 1800


def build_key(*parts) -> str:
    """Hash of the build inputs: files under the given paths, plus torch, Python, the target."""
    import torch

    from torch_musa.utils.musa_extension import target

    h = hashlib.sha256(f"{torch.__version__} {sys.version} {target()}".encode())
    roots = [*parts, PKG / "include", PKG / "utils" / "musa_extension", PKG / "utils" / "musa_converter.py",
             Path(__file__).parent / "build_inline.py"]
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


class EntryLock:
    """An exclusive flock on a cache entry while its builds run (the kernel drops it
    with the process, so it is never stale)."""

    def __init__(self, entry: Path):
        self.fd = os.open(entry / ".building", os.O_CREAT | os.O_RDWR)
        deadline = time.time() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.running = 0
                return
            except BlockingIOError:
                if time.time() > deadline:
                    os.close(self.fd)
                    pytest.fail(f"another test session has been building {entry} for {LOCK_TIMEOUT_S} s; "
                                "wait for it, or point TORCH_MUSA_EXT_TEST_CACHE elsewhere")
                time.sleep(0.5)

    def build_finished(self):
        self.running -= 1
        if self.running == 0:
            self.release()

    def release(self):
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MAX_JOBS", "2")
    return env


class BackgroundBuild:
    """A build command run in `project` in the background (nothing to do when the cache
    entry holds a finished build); `result()` imports the module it made. A failed or
    overrun build fails every later `result()` at once, with the same message."""

    def __init__(self, project: Path, module: str, prepare, command, lock: EntryLock):
        self.project, self.module, self.lock = project, module, lock
        self.log = project / "build.log"
        self.proc = None
        self.error = None
        self.done = project / "BUILT"
        if self.done.exists():
            return
        shutil.rmtree(project, ignore_errors=True)
        prepare(project)
        self.started = time.time()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, cwd=project, env=_env(), stdout=log, stderr=subprocess.STDOUT)
        lock.running += 1

    def wait(self, timeout=BUILD_TIMEOUT_S):
        if self.error is None and self.proc is not None:
            try:
                rc = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop()
                rc = None
            text = self.log.read_text()[-6000:]
            if rc is None:
                self.error = f"the build of {self.module} did not finish in {timeout} s (killed); its log:\n{text}"
            elif rc != 0:
                self.error = f"the build of {self.module} failed (exit {rc}):\n{text}"
            else:
                self.done.write_text(f"{time.time() - self.started:.1f} s\n")
            self.proc = None
            self.lock.build_finished()
        if self.error is not None:
            pytest.fail(self.error, pytrace=False)

    def result(self):
        self.wait()
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
            self.log.write_text(self.log.read_text() + "\n[killed by the test session]\n")


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
    """Starts every background build of the session; {name: BackgroundBuild}."""
    import torch

    if not torch.musa.is_available():
        pytest.skip("no musa device")
    root = cache_root(tmp_path_factory) / build_key(CORPUS, CUDA_CORPUS)
    root.mkdir(parents=True, exist_ok=True)
    lock = EntryLock(root)
    # Under the lock no build of this entry runs, so a torch build lock (FileBaton) in it
    # was left by a killed build: remove it, or load_inline would wait on it for ever.
    for stale in root.glob("*/lock"):
        stale.unlink()
    setup_py = [sys.executable, "setup.py", "build_ext", "--inplace"]
    started = {
        "corpus": BackgroundBuild(root / "corpus", "musa_corpus_ext", lambda d: shutil.copytree(CORPUS, d), setup_py, lock),
        "inline": BackgroundBuild(root / "inline", "musa_corpus_inline", lambda d: d.mkdir(),
                                  [sys.executable, "-m", "tests.extensions.build_inline"], lock),
        "root": root,
    }
    # The converted CUDA extension needs musa-converter, which needs libcst (setup installs it; a
    # machine without it skips that one test instead of failing every test of the session).
    try:
        import libcst  # noqa: F401

        started["converted"] = BackgroundBuild(root / "converted_cuda_ext", "corpus_bias_relu", convert_cuda_corpus, setup_py, lock)
    except ImportError as e:
        started["converted"] = None
        started["converted_skip"] = f"musa-converter needs libcst: {e}"
    if lock.running == 0:
        lock.release()  # everything was in the cache
    yield started
    for b in ("corpus", "inline", "converted"):
        if started[b] is not None:
            started[b].stop()
    lock.release()


@pytest.fixture(scope="module", params=["load_inline", "setup_py"])
def ext(request, builds):
    name = "inline" if request.param == "load_inline" else "corpus"
    if f"{name}_mod" not in builds:
        builds[f"{name}_mod"] = builds[name].result()
    return builds[f"{name}_mod"]
