"""musa-converter: rewrite CUDA-flavoured PyTorch sources for the musa device.

Usage::

    musa-converter -r path/to/project [-l path/to/train.py] [-e path ...]
                   [--dry-run] [--backup | --no-backup]
    python -m torch_musa.utils.musa_converter -r ...

Sources are rewritten with libcst, so formatting and comments are preserved.
This module deliberately imports neither torch nor the rest of torch_musa: it can
run on machines without a device and can be loaded straight from its file.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import stat
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst
from libcst.helpers import get_full_name_for_node

__all__ = [
    "TOKEN_RULES",
    "ConversionResult",
    "ConversionReport",
    "convert_source",
    "convert_paths",
    "main",
]

# Plain substring rules applied to identifiers, strings (incl. f-string text) and
# comments.  Order matters only for readability: no replacement produces the
# source of another one.
TOKEN_RULES: Tuple[Tuple[str, str], ...] = (
    ("cuda", "musa"),
    ("CUDA", "MUSA"),
    ("nccl", "mccl"),
    ("NCCL", "MCCL"),
    ("nvcc", "mcc"),
)

# Attribute chains that exist in stock PyTorch on every build (including
# torch_musa machines) and have no musa counterpart.  They are left as they are
# and reported, so a converted script keeps working.
KEPT_ATTRIBUTE_CHAINS = ("torch.version.cuda", "torch.backends.cuda")
# Attribute names (whatever the receiver, e.g. ``dist.is_nccl_available``) that
# stock torch only has under their CUDA spelling.
KEPT_ATTRIBUTE_NAMES = ("is_nccl_available",)

CPP_EXT_MODULE = "torch.utils.cpp_extension"
MUSA_EXT_MODULE = "torch_musa.utils.musa_extension"

RULE_IMPORT_CPP_EXT = "cpp_extension import -> musa_extension"
RULE_IMPORT_TORCH_CUDA = "torch.cuda import -> torch_musa"
RULE_LAUNCH = "import torch_musa added"
RULE_KEPT = "kept (stock torch attribute)"


def _rule_name(src: str, dst: str) -> str:
    return f"{src}->{dst}"


def _replace_tokens(text: str, counter: Counter) -> str:
    for src, dst in TOKEN_RULES:
        n = text.count(src)
        if n:
            counter[_rule_name(src, dst)] += n
            text = text.replace(src, dst)
    return text


def _dotted(expr: str) -> cst.BaseExpression:
    return cst.parse_expression(expr)


def _module_expr(dotted: str) -> cst.BaseExpression:
    """A Name/Attribute chain usable as ImportFrom.module / Import alias name."""
    node = cst.parse_expression(dotted)
    assert isinstance(node, (cst.Name, cst.Attribute))
    return node


def _torch_cuda_target(name: str) -> Optional[str]:
    """Map an imported dotted module under torch.cuda to its torch_musa name."""
    if name == "torch.cuda":
        return "torch_musa"
    if name.startswith("torch.cuda."):
        return "torch_musa." + _replace_tokens(name[len("torch.cuda.") :], Counter())
    return None


class _Rewriter(cst.CSTTransformer):
    """Applies the conversion rules to one module."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter = Counter()

    # ---- kept stock-torch attribute chains -------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> bool:
        name = get_full_name_for_node(node)
        if name in KEPT_ATTRIBUTE_CHAINS:
            self.counts[RULE_KEPT] += 1
            return False  # leave the whole chain untouched
        if node.attr.value in KEPT_ATTRIBUTE_NAMES:
            self.counts[RULE_KEPT] += 1
        return True

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        name = get_full_name_for_node(original_node)
        if name in KEPT_ATTRIBUTE_CHAINS:
            return original_node
        if original_node.attr.value in KEPT_ATTRIBUTE_NAMES:
            return updated_node.with_changes(attr=original_node.attr)
        if name == CPP_EXT_MODULE:
            self.counts[RULE_IMPORT_CPP_EXT] += 1
            return _dotted(MUSA_EXT_MODULE).with_changes(
                lpar=updated_node.lpar, rpar=updated_node.rpar
            )
        return updated_node

    # ---- identifiers, strings, comments -----------------------------------
    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = _replace_tokens(updated_node.value, self.counts)
        return updated_node.with_changes(value=new) if new != updated_node.value else updated_node

    def leave_SimpleString(
        self, original_node: cst.SimpleString, updated_node: cst.SimpleString
    ) -> cst.SimpleString:
        new = _replace_tokens(updated_node.value, self.counts)
        return updated_node.with_changes(value=new) if new != updated_node.value else updated_node

    def leave_FormattedStringText(
        self, original_node: cst.FormattedStringText, updated_node: cst.FormattedStringText
    ) -> cst.FormattedStringText:
        new = _replace_tokens(updated_node.value, self.counts)
        return updated_node.with_changes(value=new) if new != updated_node.value else updated_node

    def leave_Comment(self, original_node: cst.Comment, updated_node: cst.Comment) -> cst.Comment:
        new = _replace_tokens(updated_node.value, self.counts)
        return updated_node.with_changes(value=new) if new != updated_node.value else updated_node

    # ---- imports ------------------------------------------------------------
    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom:
        if original_node.relative or original_node.module is None:
            return updated_node
        module = get_full_name_for_node(original_node.module)
        if module is None:
            return updated_node
        # `from torch.utils.cpp_extension import X`: the module chain was already
        # rewritten (and counted) by leave_Attribute.
        if module == "torch.utils" and not isinstance(updated_node.names, cst.ImportStar):
            # from torch.utils import cpp_extension [as x]  (only when alone)
            names = list(updated_node.names)
            if len(names) == 1 and get_full_name_for_node(names[0].name) == "cpp_extension":
                alias = names[0]
                asname = alias.asname or cst.AsName(name=cst.Name("cpp_extension"))
                self.counts[RULE_IMPORT_CPP_EXT] += 1
                return updated_node.with_changes(
                    module=_module_expr("torch_musa.utils"),
                    names=[alias.with_changes(name=cst.Name("musa_extension"), asname=asname)],
                )
        target = _torch_cuda_target(module)
        if target is not None:
            self.counts[RULE_IMPORT_TORCH_CUDA] += 1
            return updated_node.with_changes(module=_module_expr(target))
        return updated_node

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        names = list(updated_node.names)
        changed = False
        for i, (orig, alias) in enumerate(zip(original_node.names, names)):
            full = get_full_name_for_node(orig.name)
            if full is None:
                continue
            # `import torch.utils.cpp_extension` is handled by leave_Attribute.
            target = _torch_cuda_target(full)
            if target is not None:
                self.counts[RULE_IMPORT_TORCH_CUDA] += 1
                names[i] = alias.with_changes(name=_module_expr(target))
                changed = True
        return updated_node.with_changes(names=names) if changed else updated_node


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], cst.Expr)
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_future_import(stmt: cst.CSTNode) -> bool:
    return (
        isinstance(stmt, cst.SimpleStatementLine)
        and any(
            isinstance(s, cst.ImportFrom)
            and s.module is not None
            and get_full_name_for_node(s.module) == "__future__"
            for s in stmt.body
        )
    )


def _imports_torch_musa_first(module: cst.Module, index: int) -> bool:
    if index >= len(module.body):
        return False
    stmt = module.body[index]
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    for s in stmt.body:
        if isinstance(s, cst.Import) and any(
            get_full_name_for_node(a.name) == "torch_musa" for a in s.names
        ):
            return True
    return False


def _add_launch_import(module: cst.Module, counts: Counter) -> cst.Module:
    """Insert ``import torch_musa`` as the first statement.

    Python only allows the module docstring and ``from __future__`` imports
    before it, so the import goes right after those.
    """
    index = 0
    body = list(module.body)
    if body and _is_docstring(body[0]):
        index = 1
    while index < len(body) and _is_future_import(body[index]):
        index += 1
    if _imports_torch_musa_first(module, index):
        return module
    # At index 0 the file's leading comments (shebang, license) live in
    # module.header and stay above the import.
    stmt = cst.parse_statement("import torch_musa\n")
    body.insert(index, stmt)
    counts[RULE_LAUNCH] += 1
    return module.with_changes(body=body)


@dataclass
class ConversionResult:
    """Outcome of converting one piece of source."""

    source: str
    converted: str
    counts: Counter

    @property
    def changed(self) -> bool:
        return self.source != self.converted


def convert_source(source: str, launch: bool = False) -> ConversionResult:
    """Convert Python source text; raises ``libcst.ParserSyntaxError`` on bad input."""
    if not isinstance(source, str):
        raise TypeError(f"convert_source expects str, got {type(source).__name__}")
    module = cst.parse_module(source)
    rewriter = _Rewriter()
    new_module = module.visit(rewriter)
    if launch:
        new_module = _add_launch_import(new_module, rewriter.counts)
    return ConversionResult(source, new_module.code, rewriter.counts)


# C/C++ and CUDA sources (extensions): plain text, the token rules after these, which
# map CUDA spellings whose musa counterpart is not a token swap.
CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hxx")
CPP_RULES: Tuple[Tuple[str, str], ...] = (
    ("is_cuda()", "is_privateuseone()"),
    ("kCUDA", "kPrivateUse1"),
    ("DeviceType::CUDA", "DeviceType::PrivateUse1"),
)


def convert_cpp_source(source: str) -> ConversionResult:
    """Convert C/C++/CUDA source text (``.cu`` keeps its name: rename it ``.mu`` if you like)."""
    counts: Counter = Counter()
    text = source
    for src, dst in CPP_RULES:
        n = text.count(src)
        if n:
            counts[_rule_name(src, dst)] += n
            text = text.replace(src, dst)
    return ConversionResult(source, _replace_tokens(text, counts), counts)


# --------------------------------------------------------------------------
# Files and folders
# --------------------------------------------------------------------------

BACKUP_SUFFIX = ".cuda.bak"
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", ".tox", ".venv", ".mypy_cache"}


@dataclass
class ConversionReport:
    seen: int = 0
    changed: List[str] = field(default_factory=list)
    unchanged: List[str] = field(default_factory=list)
    skipped: List[Tuple[str, str]] = field(default_factory=list)  # (path, reason)
    failed: List[Tuple[str, str]] = field(default_factory=list)  # (path, reason)
    counts: Counter = field(default_factory=Counter)
    diffs: Dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.skipped and not self.failed

    def render(self, dry_run: bool = False) -> str:
        verb = "would change" if dry_run else "changed"
        lines = [
            "musa-converter report",
            f"  files seen:      {self.seen}",
            f"  files {verb}: {len(self.changed)}",
            f"  files unchanged: {len(self.unchanged)}",
            f"  files skipped:   {len(self.skipped)}",
            f"  files failed:    {len(self.failed)}",
        ]
        if self.counts:
            lines.append("  replacements per rule:")
            width = max(len(k) for k in self.counts)
            for rule, n in sorted(self.counts.items()):
                lines.append(f"    {rule.ljust(width)}  {n}")
        for path, reason in self.skipped:
            lines.append(f"  SKIPPED {path}: {reason}")
        for path, reason in self.failed:
            lines.append(f"  FAILED  {path}: {reason}")
        return "\n".join(lines)


def _is_excluded(path: str, excluded: Sequence[str]) -> bool:
    for ex in excluded:
        if path == ex or path.startswith(ex.rstrip(os.sep) + os.sep):
            return True
    return False


def collect_files(root: str, excluded: Sequence[str] = ()) -> List[str]:
    """Python and C/C++/CUDA files under ``root`` (a file or a folder), sorted, minus exclusions."""
    root = os.path.abspath(root)
    excluded = [os.path.abspath(e) for e in excluded]
    if os.path.isfile(root):
        return [] if _is_excluded(root, excluded) else [root]
    if not os.path.isdir(root):
        raise FileNotFoundError(f"root path does not exist: {root}")
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in _SKIP_DIRS and not _is_excluded(os.path.join(dirpath, d), excluded)
        )
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if name.endswith((".py",) + CPP_SUFFIXES) and not _is_excluded(full, excluded):
                found.append(full)
    return found


def _atomic_write(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same folder + rename."""
    directory = os.path.dirname(path) or "."
    mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else 0o644
    fd, tmp = tempfile.mkstemp(prefix=".musa-converter-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _detect_newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def convert_file(
    path: str,
    report: ConversionReport,
    launch: bool = False,
    dry_run: bool = False,
    backup: bool = True,
    display_path: Optional[str] = None,
) -> None:
    shown = display_path or path
    report.seen += 1
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        report.failed.append((shown, f"cannot read: {e}"))
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        report.skipped.append((shown, f"not UTF-8 ({e.reason} at byte {e.start})"))
        return
    # Keep a BOM out of libcst's way and put it back afterwards.
    bom = ""
    if text.startswith("\ufeff"):
        bom, text = "\ufeff", text[1:]
    try:
        result = convert_cpp_source(text) if path.endswith(CPP_SUFFIXES) else convert_source(text, launch=launch)
    except cst.ParserSyntaxError as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else "syntax error"
        report.skipped.append((shown, f"not valid Python (line {e.raw_line}: {msg})"))
        return
    except Exception as e:  # libcst internal failure: never touch the file
        report.failed.append((shown, f"conversion error: {type(e).__name__}: {e}"))
        return
    report.counts.update(result.counts)
    if not result.changed:
        report.unchanged.append(shown)
        return
    report.changed.append(shown)
    diff_lines = difflib.unified_diff(
        result.source.splitlines(),
        result.converted.splitlines(),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
        lineterm="",
    )
    diff = "".join(line + "\n" for line in diff_lines)
    report.diffs[shown] = diff
    if dry_run:
        return
    try:
        if backup:
            shutil.copy2(path, path + BACKUP_SUFFIX)
        _atomic_write(path, (bom + result.converted).encode("utf-8"))
    except OSError as e:
        report.changed.remove(shown)
        report.failed.append((shown, f"cannot write: {e}"))


def convert_paths(
    root: str,
    launch_path: Optional[str] = None,
    excluded: Iterable[str] = (),
    dry_run: bool = False,
    backup: bool = True,
    progress: Optional[bool] = None,
) -> ConversionReport:
    """Convert every Python and C/C++/CUDA file under ``root``; returns the report."""
    excluded = list(excluded)
    files = collect_files(root, excluded)
    launch_abs = os.path.abspath(launch_path) if launch_path else None
    if launch_abs is not None:
        if not os.path.isfile(launch_abs):
            raise FileNotFoundError(f"launch path is not a file: {launch_path}")
        if launch_abs not in files:
            files.append(launch_abs)
    base = os.path.abspath(root)
    base = os.path.dirname(base) if os.path.isfile(base) else base
    report = ConversionReport()
    if progress is None:
        progress = os.path.isdir(root)
    iterator: Iterable[str] = files
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(files, desc="musa-converter", unit="file", file=sys.stderr)
        iterator = bar
    try:
        for path in iterator:
            rel = os.path.relpath(path, base)
            shown = rel if not rel.startswith("..") else path
            convert_file(
                path,
                report,
                launch=(path == launch_abs),
                dry_run=dry_run,
                backup=backup,
                display_path=shown,
            )
    finally:
        if bar is not None:
            bar.close()
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="musa-converter",
        description="Rewrite CUDA-flavoured PyTorch sources to run on torch_musa "
        "(formatting and comments are preserved).",
    )
    p.add_argument("-r", "--root_path", required=True, help="file or folder to convert")
    p.add_argument(
        "-l",
        "--launch_path",
        default=None,
        help="entry script; gets `import torch_musa` as its first statement",
    )
    p.add_argument(
        "-e",
        "--excluded_path",
        nargs="*",
        default=[],
        help="files or folders to leave alone",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print a unified diff of what would change; write nothing",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--backup",
        dest="backup",
        action="store_true",
        default=True,
        help=f"keep each original as <file>{BACKUP_SUFFIX} (default)",
    )
    g.add_argument("--no-backup", dest="backup", action="store_false", help="do not keep originals")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point (``musa-converter``). Returns the exit code.

    0: every file converted or already clean; 1: some file was skipped (not
    UTF-8, not valid Python) or could not be written; 2: bad arguments.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not os.path.exists(args.root_path):
        parser.error(f"--root_path does not exist: {args.root_path}")
    if args.launch_path is not None and not os.path.isfile(args.launch_path):
        parser.error(f"--launch_path is not a file: {args.launch_path}")
    if args.launch_path is not None and not args.launch_path.endswith(".py"):
        parser.error(f"--launch_path must be a .py file: {args.launch_path}")
    for ex in args.excluded_path:
        if not os.path.exists(ex):
            print(f"musa-converter: warning: excluded path does not exist: {ex}", file=sys.stderr)
    report = convert_paths(
        args.root_path,
        launch_path=args.launch_path,
        excluded=args.excluded_path,
        dry_run=args.dry_run,
        backup=args.backup,
        progress=False if args.no_progress else None,
    )
    if args.dry_run:
        for shown in report.changed:
            sys.stdout.write(report.diffs[shown])
    print(report.render(dry_run=args.dry_run), file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
