"""Rewrites a ``.mu`` source into C++ for the host driver's SIMT emulation.

A C++ compiler does not parse CUDA's launch syntax or shared-memory qualifiers, so a
kernel source is rewritten before the host compiler sees it:

* ``kernel<<<grid, block[, shared[, stream]]>>>(args)`` becomes a call of
  ``musa_simt::launch`` (``torch_musa/include/musa_simt/launch.h``): the arguments are
  evaluated at the launch and the grid runs as a task on the stream;
* ``__shared__`` variables become ``static thread_local`` (one block at a time runs on
  each OS thread) and ``extern __shared__ T name[];`` points at the block's dynamic
  shared memory;
* the output starts with ``#include <musa_simt/device.h>`` and ``#line`` directives, so
  compiler messages name the original file and line.

Quoted includes of other kernel headers (``.muh``/``.cuh``/``.mu``/``.cu``) are rewritten
too. Constructs the emulation does not offer are build errors that name them and the
place (``MusaSourceError``), unless they sit in a conditional group on ``__MUSA_SIMT__``,
``__MUSA_ARCH__`` or ``__CUDA_ARCH__`` (left to the preprocessor).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

KERNEL_HEADER_SUFFIXES = (".muh", ".cuh", ".mu", ".cu")

# Names outside the emulated subset, with what they are.
UNSUPPORTED: Dict[str, str] = {
    "asm": "inline assembly",
    "__asm__": "inline assembly",
    "__asm": "inline assembly",
    "__match_any_sync": "a warp match operation",
    "__match_all_sync": "a warp match operation",
    "__reduce_add_sync": "a warp reduce operation",
    "__reduce_min_sync": "a warp reduce operation",
    "__reduce_max_sync": "a warp reduce operation",
    "__reduce_and_sync": "a warp reduce operation",
    "__reduce_or_sync": "a warp reduce operation",
    "__reduce_xor_sync": "a warp reduce operation",
    "cooperative_groups": "cooperative groups",
    "__managed__": "managed memory",
    "tex1Dfetch": "texture fetches",
    "tex1D": "texture fetches",
    "tex2D": "texture fetches",
    "tex3D": "texture fetches",
    "surf2Dread": "surface access",
    "surf2Dwrite": "surface access",
    "__nanosleep": "__nanosleep",
    "__trap": "__trap",
    "__pipeline_memcpy_async": "asynchronous copies",
    "wmma": "warp matrix (tensor core) operations",
    "musaLaunchCooperativeKernel": "cooperative launches",
    "cudaLaunchCooperativeKernel": "cooperative launches",
}
# Conditional groups on these macros are the preprocessor's business.
GUARD_MACROS = re.compile(r"\b(__MUSA_SIMT__|__MUSA_ARCH__|__CUDA_ARCH__|TORCH_MUSA_EXT_CUDA|TORCH_MUSA_EXT_HOST)\b")

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class MusaSourceError(RuntimeError):
    """A kernel source uses something the host SIMT emulation cannot compile."""


@dataclass
class _Source:
    text: str
    masked: str  # code only: comments, literals and directives blanked (newlines kept)
    directives: List[Tuple[int, int]] = field(default_factory=list)  # spans of preprocessor lines
    guarded: List[Tuple[int, int]] = field(default_factory=list)  # spans of guarded #if groups


def _mask(text: str) -> _Source:
    """Blanks everything that is not code, keeping offsets and newlines."""
    out = list(text)
    n = len(text)
    i = 0
    at_line_start = True
    directives: List[Tuple[int, int]] = []

    def blank(a: int, b: int) -> None:
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            at_line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                if text.startswith("/*", j):  # a block comment inside a directive
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            directives.append((i, j))
            blank(i, j)
            i = j
            continue
        at_line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            blank(i + 1, j)
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    src = _Source(text, "".join(out), directives)
    src.guarded = _guarded_groups(text, directives)
    return src


def _guarded_groups(text: str, directives: List[Tuple[int, int]]) -> List[Tuple[int, int]]:
    """Spans of #if ... #endif groups whose opening condition names a guard macro."""
    spans = []
    stack: List[Tuple[int, bool]] = []
    for a, b in directives:
        d = text[a:b].lstrip("#").strip()
        word = _IDENT.match(d)
        kind = word.group(0) if word else ""
        if kind in ("if", "ifdef", "ifndef"):
            stack.append((a, bool(GUARD_MACROS.search(d))))
        elif kind == "endif" and stack:
            start, guarded = stack.pop()
            if guarded:
                spans.append((start, b))
    return spans


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _match_forward(m: str, i: int, open_c: str, close_c: str) -> int:
    """Index just past the bracket closing the one at i (code text, other brackets nested)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [close_c]
    j = i + 1
    while j < len(m):
        c = m[j]
        if c in pairs:
            stack.append(pairs[c])
        elif c in ")]}":
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j + 1
        j += 1
    return -1


def _match_back(m: str, j: int, open_c: str, close_c: str) -> int:
    """Index of the bracket opening the one at j."""
    depth = 0
    k = j
    while k >= 0:
        c = m[k]
        if c == close_c:
            depth += 1
        elif c == open_c:
            depth -= 1
            if depth == 0:
                return k
        elif close_c == ">" and c == ")":
            k = _match_back(m, k, "(", ")")
            if k < 0:
                return -1
        elif c in ";{}":
            return -1
        k -= 1
    return -1


def _callee_start(m: str, end: int) -> int:
    """Start of the kernel expression that ends at `end` (``ns::k<T, 4>``, ``(fn)``)."""
    j = end
    while True:
        while j > 0 and m[j - 1].isspace():
            j -= 1
        if j > 0 and m[j - 1] == ")":
            k = _match_back(m, j - 1, "(", ")")
            return k if k >= 0 else -1
        if j > 0 and m[j - 1] == ">":
            k = _match_back(m, j - 1, "<", ">")
            if k < 0:
                return -1
            j = k
            while j > 0 and m[j - 1].isspace():
                j -= 1
        k = j
        while k > 0 and (m[k - 1].isalnum() or m[k - 1] == "_"):
            k -= 1
        if k == j:
            return -1
        j = k
        q = j
        while q > 0 and m[q - 1].isspace():
            q -= 1
        if m[q - 2 : q] == "::":
            j = q - 2
            r = j
            while r > 0 and m[r - 1].isspace():
                r -= 1
            if r == 0 or not (m[r - 1].isalnum() or m[r - 1] in "_>"):
                return j  # ::kernel
            continue
        return j


def _find_launch_end(m: str, start: int) -> int:
    """Index of the ``>>>`` closing the launch configuration that starts at `start`."""
    depth = 0
    j = start
    while j < len(m):
        c = m[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                return -1
        elif c == ";":
            return -1
        elif depth == 0 and m.startswith(">>>", j):
            return j
        j += 1
    return -1


class _Rewriter:
    def __init__(self, path: str, text: str):
        self.path = path
        self.src = _mask(text)
        self.edits: List[Tuple[int, int, str]] = []

    def error(self, pos: int, what: str) -> MusaSourceError:
        return MusaSourceError(f"{self.path}:{_line_of(self.src.text, pos)}: {what}")

    def in_guarded(self, pos: int) -> bool:
        return any(a <= pos < b for a, b in self.src.guarded)

    def check_directives(self) -> None:
        for a, b in self.src.directives:
            if "<<<" in self.src.text[a:b]:
                raise self.error(a, "a kernel launch (<<<...>>>) inside a preprocessor directive (macro) is not "
                                    "supported by the host SIMT emulation: launch outside the macro")

    def check_unsupported(self) -> None:
        for mt in _IDENT.finditer(self.src.masked):
            name = mt.group(0)
            if name in UNSUPPORTED and not self.in_guarded(mt.start()):
                raise self.error(mt.start(), f"`{name}` ({UNSUPPORTED[name]}) is not supported by the host SIMT "
                                             "emulation (the host driver runs kernels on the CPU); build for the cuda "
                                             "driver, or keep it under `#ifndef __MUSA_SIMT__`")

    def rewrite_launches(self) -> None:
        m, t = self.src.masked, self.src.text
        pos = 0
        while True:
            i = m.find("<<<", pos)
            if i < 0:
                return
            pos = i + 3
            before = m[:i].rstrip()
            if before.endswith("operator") or m.startswith("<<<<", i):
                continue
            start = _callee_start(m, i)
            if start < 0:
                raise self.error(i, "cannot tell which kernel this <<<...>>> launches (write `name<<<...>>>(...)` "
                                    "or `ns::name<T><<<...>>>(...)`)")
            close = _find_launch_end(m, i + 3)
            if close < 0:
                raise self.error(i, "kernel launch: no `>>>` closes this `<<<`")
            k = close + 3
            while k < len(m) and m[k].isspace():
                k += 1
            if k >= len(m) or m[k] != "(":
                raise self.error(close, "kernel launch: `>>>` must be followed by the kernel's argument list")
            end = _match_forward(m, k, "(", ")")
            if end < 0:
                raise self.error(k, "kernel launch: unbalanced parentheses in the argument list")
            callee = t[start:i].strip()
            cfg = t[i + 3 : close]
            args = t[k + 1 : end - 1]
            name = re.sub(r"\s+", " ", callee).replace("\\", "\\\\").replace('"', '\\"')
            dropped_newlines = t[start:i].count("\n") + t[close:k].count("\n")
            call = (
                f'::musa_simt::launch(::musa_simt::config({cfg}), "{name}", '
                f"[=](auto&&... musa_simt_a_) {{ {callee}(musa_simt_a_...); }}"
                + (f", {args}" if args.strip() else "")
                + ")"
                + "\n" * dropped_newlines
            )
            self.edits.append((start, end, call))
            pos = end

    def rewrite_shared(self) -> None:
        m = self.src.masked
        ext = re.compile(r"\bextern\s+__shared__\b([^;]*?)\b([A-Za-z_]\w*)\s*\[\s*\]([^;]*);")
        taken = []
        for mt in ext.finditer(m):
            decl_type = mt.group(1) + " " + mt.group(3)
            decl_type = re.sub(r"__align__\s*\([^)]*\)|alignas\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)", " ", decl_type)
            decl_type = " ".join(decl_type.split())
            if not decl_type:
                raise self.error(mt.start(), "extern __shared__ declaration without an element type")
            name = mt.group(2)
            text = (f"static thread_local {decl_type}* const {name} = "
                    f"reinterpret_cast<{decl_type}*>(::musa_simt::dynamic_shared());")
            text += "\n" * self.src.text[mt.start() : mt.end()].count("\n")
            self.edits.append((mt.start(), mt.end(), text))
            taken.append((mt.start(), mt.end()))
        for mt in re.finditer(r"\b__shared__\b", m):
            if any(a <= mt.start() < b for a, b in taken):
                continue
            prev = m[: mt.start()].rstrip()
            word = re.search(r"(\w+)$", prev)
            self.edits.append((mt.start(), mt.end(), "thread_local" if word and word.group(1) == "static"
                               else "static thread_local"))

    def apply(self) -> str:
        text = self.src.text
        for a, b, new in sorted(self.edits, key=lambda e: e[0], reverse=True):
            text = text[:a] + new + text[b:]
        return text


def rewrite_source(path: str, text: str) -> str:
    """The host-compilable C++ for kernel source `text` (read from `path`)."""
    rw = _Rewriter(path, text)
    rw.check_directives()
    rw.check_unsupported()
    rw.rewrite_launches()
    rw.rewrite_shared()
    return rw.apply()


def _quote_includes(text: str) -> List[Tuple[int, int, str]]:
    return [(mt.start(1), mt.end(1), mt.group(1))
            for mt in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', text, re.M)]


def rewrite_file(path: str, out_dir: str, suffix: str = ".cpp", _done: Optional[Dict[str, str]] = None) -> str:
    """Writes the rewritten `path` (and the kernel headers it includes) under `out_dir`.

    Returns the path of the generated translation unit. Files are only rewritten when
    their content changes, so ninja does not rebuild what did not change.
    """
    path = os.path.abspath(path)
    done = {} if _done is None else _done
    if path in done:
        return done[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    tag = re.sub(r"[^A-Za-z0-9_.]", "_", path.lstrip(os.sep))
    out = os.path.join(out_dir, tag + suffix)
    done[path] = out
    body = rewrite_source(path, text)
    # Point kernel-header includes at their rewritten copies (resolved as the compiler would:
    # relative to this file first).
    for a, b, inc in reversed(_quote_includes(body)):
        target = os.path.join(os.path.dirname(path), inc)
        if inc.endswith(KERNEL_HEADER_SUFFIXES) and os.path.isfile(target):
            gen = rewrite_file(target, out_dir, ".h", done)
            body = body[:a] + gen + body[b:]
    lines = []
    if suffix != ".h":
        lines.append("#include <musa_simt/device.h>")
    else:
        lines.append("#pragma once")
    lines.append(f'#line 1 "{path}"')
    content = "\n".join(lines) + "\n" + body
    os.makedirs(out_dir, exist_ok=True)
    old = None
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            old = f.read()
    if old != content:
        tmp = out + f".tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(content)
        os.replace(tmp, out)
    return out
