"""musa-converter: rules, formatting preservation, safety (dry-run, backups,
atomic writes, bad files), report and exit codes, and the CUDA script corpus."""
import ast
import os
import re
import shutil
import stat
import textwrap

import pytest

from tests.tools.conftest import CORPUS, CORPUS_SCRIPTS, REPO, load_tool, run_python

pytest.importorskip("libcst", reason="the converter rewrites sources with libcst: pip install libcst")
conv = load_tool("musa_converter")


def convert(src, launch=False):
    return conv.convert_source(textwrap.dedent(src), launch=launch).converted


# Tokens a rule covers, and the stock-torch spellings kept on purpose.
COVERED = re.compile(r"cuda|CUDA|nccl|NCCL|nvcc")
KEPT = re.compile(r"torch\.version\.cuda|torch\.backends\.cuda\b|is_nccl_available")


def remaining_tokens(text):
    return COVERED.findall(KEPT.sub("", text))


# ---------------------------------------------------------------- rules


def test_rules_cover_names_strings_fstrings_comments():
    src = '''\
    import os
    import torch
    os.environ["CUDA_VISIBLE_DEVICES"] = "0"  # pin the cuda device
    print(os.environ.get("CUDA_HOME"), os.environ.get("NCCL_DEBUG"))
    dev = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    x = torch.ones(2).cuda()
    assert x.is_cuda
    rank = 3
    print(f"cuda:{rank} nccl {x.device!r}")
    torch.cuda.synchronize()
    cmd = ["nvcc", "-O3"]
    '''
    out = convert(src)
    expected = '''\
    import os
    import torch
    os.environ["MUSA_VISIBLE_DEVICES"] = "0"  # pin the musa device
    print(os.environ.get("MUSA_HOME"), os.environ.get("MCCL_DEBUG"))
    dev = torch.device("musa:0" if torch.musa.is_available() else "cpu")
    x = torch.ones(2).musa()
    assert x.is_musa
    rank = 3
    print(f"musa:{rank} mccl {x.device!r}")
    torch.musa.synchronize()
    cmd = ["mcc", "-O3"]
    '''
    assert out == textwrap.dedent(expected)


def test_formatting_and_comments_are_preserved_exactly():
    src = (
        "#!/usr/bin/env python\n"
        "# -*- coding: utf-8 -*-\n"
        "def f( a ,b = 1 ):   # odd spacing kept\n"
        "    return (a+\n"
        "            b)  # trailing\n"
        "\n\n"
        "x = [1,\n"
        "     2,]\n"
    )
    assert conv.convert_source(src).converted == src
    assert not conv.convert_source(src).changed


def test_imports_cpp_extension_and_torch_cuda():
    src = '''\
    import torch.cuda
    import torch.cuda.amp as amp
    from torch.cuda.amp import autocast, GradScaler
    from torch.cuda import nvtx
    from torch.utils.cpp_extension import CUDAExtension, BuildExtension, CUDA_HOME
    from torch.utils import cpp_extension
    import torch.utils.cpp_extension
    ext = torch.utils.cpp_extension.load(name="k", sources=["k.cpp"], extra_cuda_cflags=["-O2"])
    '''
    out = convert(src)
    assert out == textwrap.dedent(
        '''\
    import torch_musa
    import torch_musa.amp as amp
    from torch_musa.amp import autocast, GradScaler
    from torch_musa import nvtx
    from torch_musa.utils.musa_extension import MUSAExtension, BuildExtension, MUSA_HOME
    from torch_musa.utils import musa_extension as cpp_extension
    import torch_musa.utils.musa_extension
    ext = torch_musa.utils.musa_extension.load(name="k", sources=["k.cpp"], extra_musa_cflags=["-O2"])
    '''
    )


def test_stock_torch_cuda_attributes_are_kept():
    src = '''\
    import torch
    import torch.distributed as dist
    torch.backends.cuda.matmul.allow_tf32 = True
    print(torch.version.cuda, dist.is_nccl_available())
    '''
    res = conv.convert_source(textwrap.dedent(src))
    assert res.converted == textwrap.dedent(src)
    assert res.counts[conv.RULE_KEPT] == 3


def test_conversion_is_idempotent():
    src = CORPUS.joinpath("train_ddp.py").read_text()
    once = conv.convert_source(src, launch=True).converted
    twice = conv.convert_source(once, launch=True)
    assert once != src
    assert twice.converted == once
    assert not twice.changed


@pytest.mark.parametrize(
    "src, expected",
    [
        ("import torch\n", "import torch_musa\nimport torch\n"),
        ('"""Doc."""\nimport torch\n', '"""Doc."""\nimport torch_musa\nimport torch\n'),
        (
            '"""Doc."""\nfrom __future__ import annotations\nimport os\n',
            '"""Doc."""\nfrom __future__ import annotations\nimport torch_musa\nimport os\n',
        ),
        ("#!/usr/bin/env python\n# license\nx = 1\n", "#!/usr/bin/env python\n# license\nimport torch_musa\nx = 1\n"),
        ("import torch_musa\nimport torch\n", "import torch_musa\nimport torch\n"),
    ],
)
def test_launch_import_is_first_statement(src, expected):
    out = conv.convert_source(src, launch=True).converted
    assert out == expected
    compile(out, "<launch>", "exec")


def test_bad_source_raises_parser_error():
    import libcst

    with pytest.raises(libcst.ParserSyntaxError):
        conv.convert_source("def f(:\n")
    with pytest.raises(TypeError, match="expects str"):
        conv.convert_source(b"import torch\n")


# ---------------------------------------------------------------- CLI / files


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "vendor").mkdir()
    (root / "train.py").write_text('import torch\nx = torch.zeros(1).cuda()  # to cuda\n')
    (root / "pkg" / "model.py").write_text('DEVICE = "cuda"\n')
    (root / "pkg" / "clean.py").write_text("VALUE = 1\n")
    (root / "vendor" / "third.py").write_text('BACKEND = "nccl"\n')
    os.chmod(root / "train.py", 0o755)
    return root


def snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_dry_run_prints_diff_and_changes_nothing(project, capsys):
    before = snapshot(project)
    rc = conv.main(["-r", str(project), "--dry-run", "--no-progress"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert snapshot(project) == before
    assert "--- a/train.py" in out and "+++ b/train.py" in out
    assert '-x = torch.zeros(1).cuda()  # to cuda' in out
    assert '+x = torch.zeros(1).musa()  # to musa' in out
    assert '+DEVICE = "musa"' in out
    assert "files would change: 3" in err
    assert "files seen:      4" in err


def test_write_keeps_backups_atomically_and_preserves_mode(project, capsys):
    original = (project / "train.py").read_bytes()
    rc = conv.main(["-r", str(project), "--no-progress"])
    assert rc == 0
    assert (project / "train.py").read_text() == 'import torch\nx = torch.zeros(1).musa()  # to musa\n'
    assert (project / ("train.py" + conv.BACKUP_SUFFIX)).read_bytes() == original
    assert stat.S_IMODE(os.stat(project / "train.py").st_mode) == 0o755
    assert not (project / ("pkg/clean.py" + conv.BACKUP_SUFFIX)).exists()  # unchanged: no backup
    assert not list(project.rglob(".musa-converter-*"))  # no temp files left behind
    err = capsys.readouterr().err
    assert "cuda->musa" in err and "nccl->mccl" in err
    assert "files changed: 3" in err and "files unchanged: 1" in err


def test_no_backup_and_exclusions(project):
    rc = conv.main(["-r", str(project), "--no-backup", "-e", str(project / "vendor"), "--no-progress"])
    assert rc == 0
    assert not list(project.rglob("*" + conv.BACKUP_SUFFIX))
    assert (project / "vendor" / "third.py").read_text() == 'BACKEND = "nccl"\n'
    assert (project / "pkg" / "model.py").read_text() == 'DEVICE = "musa"\n'


def test_bad_files_are_skipped_reported_and_untouched(project, capsys):
    bad_syntax = project / "pkg" / "broken.py"
    bad_syntax.write_text("x = torch.cuda(\n")
    latin1 = project / "pkg" / "latin1.py"
    latin1.write_bytes('# caf\xe9 cuda\nx = "cuda"\n'.encode("latin-1"))
    before = {p: p.read_bytes() for p in (bad_syntax, latin1)}
    rc = conv.main(["-r", str(project), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1
    assert {p: p.read_bytes() for p in before} == before
    assert not (project / ("pkg/broken.py" + conv.BACKUP_SUFFIX)).exists()
    assert re.search(r"SKIPPED pkg/broken.py: not valid Python \(line 1", err)
    assert re.search(r"SKIPPED pkg/latin1.py: not UTF-8", err)
    assert "files skipped:   2" in err
    assert (project / "train.py").read_text().count("musa") == 2  # the good files still converted


def test_progress_bar_for_folders(project, capsys):
    conv.main(["-r", str(project), "--dry-run"])
    assert "musa-converter: 100%" in capsys.readouterr().err


def test_launch_path_and_single_file_root(project):
    rc = conv.main(["-r", str(project / "pkg" / "model.py"), "-l", str(project / "train.py")])
    assert rc == 0
    assert (project / "train.py").read_text().startswith("import torch_musa\nimport torch\n")
    assert (project / "pkg" / "model.py").read_text() == 'DEVICE = "musa"\n'


def test_bad_arguments_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        conv.main(["-r", str(tmp_path / "missing")])
    assert e.value.code == 2
    assert "--root_path does not exist" in capsys.readouterr().err
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(SystemExit) as e:
        conv.main(["-r", str(tmp_path), "-l", str(tmp_path / "a.txt")])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        conv.main([])
    assert e.value.code == 2


def test_write_failure_is_reported_and_original_kept(project, capsys, monkeypatch):
    original = (project / "train.py").read_bytes()

    def boom(path, data):
        raise OSError("disk full")

    monkeypatch.setattr(conv, "_atomic_write", boom)
    rc = conv.main(["-r", str(project / "train.py"), "--no-backup"])
    assert rc == 1
    assert (project / "train.py").read_bytes() == original
    assert "FAILED  train.py: cannot write: disk full" in capsys.readouterr().err


# ---------------------------------------------------------------- corpus


@pytest.fixture(scope="module")
def converted_corpus(tmp_path_factory):
    dst = tmp_path_factory.mktemp("converted") / "corpus"
    shutil.copytree(CORPUS, dst, ignore=shutil.ignore_patterns("__pycache__"))
    report = conv.convert_paths(str(dst), launch_path=str(dst / "train_amp.py"), progress=False)
    return dst, report


def test_corpus_converts_cleanly(converted_corpus):
    dst, report = converted_corpus
    assert report.ok, report.render()
    assert report.seen == len([p for p in CORPUS.rglob("*") if p.suffix in (".py", ".cu", ".cpp")])
    assert len(report.changed) == report.seen
    for path in dst.glob("*.py"):
        text = path.read_text()
        ast.parse(text, filename=str(path))
        assert remaining_tokens(text) == [], f"{path.name}: {remaining_tokens(text)}"
    assert (dst / "train_amp.py").read_text().splitlines()[2] == "import torch_musa"
    assert report.counts["cuda->musa"] > 20


@pytest.mark.parametrize("script", CORPUS_SCRIPTS)
def test_converted_corpus_runs_on_musa(musa, converted_corpus, script, extensions_dir):
    dst, _ = converted_corpus
    res = run_python([script, "--steps", "3"], cwd=dst, TORCH_EXTENSIONS_DIR=extensions_dir)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    name = script[:-3]
    assert re.search(rf"\[{name}\] OK device=musa:0 is_musa=True loss=\d+\.\d+", res.stdout), res.stdout


def test_module_entry_point_runs(musa, tmp_path):
    f = tmp_path / "s.py"
    f.write_text('x = "cuda"\n')
    res = run_python(["-m", "torch_musa.utils.musa_converter", "-r", str(f), "--dry-run"], cwd=REPO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert '+x = "musa"' in res.stdout
    assert f.read_text() == 'x = "cuda"\n'
