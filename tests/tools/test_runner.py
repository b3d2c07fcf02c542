"""python -m torch_musa.run: the unconverted CUDA corpus runs on musa; child
Python processes get the compat layer too; bad input gives a clear error."""
import re
import sys

import pytest

from tests.tools.conftest import CORPUS, CORPUS_SCRIPTS, REPO, run_python


@pytest.mark.parametrize("script", CORPUS_SCRIPTS)
def test_unmodified_corpus_runs_under_runner(musa, script, extensions_dir):
    res = run_python(["-m", "torch_musa.run", script, "--steps", "3"], cwd=CORPUS, TORCH_EXTENSIONS_DIR=extensions_dir)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    name = script[:-3]
    # is_cuda is reported True for musa tensors under the compat layer
    assert re.search(rf"\[{name}\] OK device=musa:0 is_cuda=True loss=\d+\.\d+", res.stdout), res.stdout


def test_without_runner_the_corpus_does_not_use_musa(musa):
    """Reference: the same script on stock torch has no CUDA, so it cannot run."""
    res = run_python(["env_streams.py", "--steps", "1"], cwd=CORPUS)
    assert res.returncode != 0
    assert "this script needs a CUDA GPU" in res.stderr


def test_child_processes_get_compat(musa, tmp_path):
    child = "import torch; print('child', torch.cuda.is_available(), torch.zeros(1, device='cuda').device)"
    script = tmp_path / "parent.py"
    script.write_text(
        "import subprocess, sys\n"
        f"out = subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, text=True)\n"
        "print(out.stdout, out.stderr)\n"
        "import torch.multiprocessing as mp\n"
        "def work(i):\n"
        "    import torch\n"
        "    print('spawned', i, torch.ones(1, device='cuda').device, flush=True)\n"
        "if __name__ == '__main__':\n"
        "    mp.spawn(work, nprocs=1)\n"
    )
    res = run_python(["-m", "torch_musa.run", str(script)], cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "child True musa:0" in res.stdout
    assert "spawned 0 musa:0" in res.stdout


def test_module_mode_and_argv(musa, tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        "import sys, torch\n"
        "print('argv', sys.argv[1:], torch.randn(2, device='cuda').device, __name__)\n"
    )
    res = run_python(["-m", "torch_musa.run", "-m", "mypkg.job", "--lr", "0.1", "-x"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "argv ['--lr', '0.1', '-x'] musa:0 __main__" in res.stdout


def test_bad_invocations(musa, tmp_path):
    res = run_python(["-m", "torch_musa.run"], cwd=tmp_path)
    assert res.returncode == 2 and "usage: python -m torch_musa.run" in res.stdout
    res = run_python(["-m", "torch_musa.run", "missing.py"], cwd=tmp_path)
    assert res.returncode == 1 and "no such script: missing.py" in res.stderr
    res = run_python(["-m", "torch_musa.run", "--bogus"], cwd=tmp_path)
    assert res.returncode == 1 and "unknown option '--bogus'" in res.stderr


def test_script_exit_code_and_exceptions_propagate(musa, tmp_path):
    (tmp_path / "fail.py").write_text("import sys\nsys.exit(3)\n")
    assert run_python(["-m", "torch_musa.run", "fail.py"], cwd=tmp_path).returncode == 3
    (tmp_path / "boom.py").write_text("raise ValueError('boom from script')\n")
    res = run_python(["-m", "torch_musa.run", "boom.py"], cwd=tmp_path)
    assert res.returncode == 1 and "ValueError: boom from script" in res.stderr


def test_ddp_corpus_multi_process_under_runner(musa, extensions_dir):
    import socket

    import torch.distributed as dist

    if "mccl" not in dist.Backend.backend_list:
        pytest.skip("no 'mccl' torch.distributed backend registered: nccl maps to gloo, which cannot "
                    "reduce musa tensors (DDP on musa needs the mccl issue)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_python(["-m", "torch_musa.run", "train_ddp.py", "--spawn", "2", "--steps", "2"], cwd=CORPUS,
                     MASTER_PORT=port)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert re.search(r"\[train_ddp\] OK device=musa:0 is_cuda=True", res.stdout), res.stdout
