#!/usr/bin/env python3
"""Checks that the MUSA runtime (runtime/) stays below the backend: C++17 with no torch, no Python
and nothing of backend/, so no include or link loop can run backend -> runtime -> backend.

    python3 scripts/check_runtime_layer.py [--root DIR] [--lib DIR] [--no-binaries]

Sources (runtime/**/*.h, *.cpp, ...): every quoted #include resolves to a runtime file; no angle
include names a torch or Python header or a header of backend/; the code (comments and strings
left out) names no at::, c10::, torch::, torch_musa:: or pybind11:: and no Python C API; it
declares no weak symbol and looks no symbol up in the process's global scope (dlsym with
RTLD_DEFAULT/RTLD_NEXT). Those last two are how a runtime could call the backend without
including it; a layer above hands the runtime a callback through a documented call instead.
CMake (runtime/CMakeLists.txt): names no backend path, no torch or Python variable or target.
Binaries (libmusart.so, libmusa_cuda_driver.so in --lib, default torch_musa/, when built): they
need no torch or Python library, and every symbol they take from elsewhere is versioned (a
system or CUDA library's) or, for the cuda driver, the runtime's own.

Exit status: 0 when the runtime stands alone, 1 otherwise (each violation printed).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
# Header roots of torch (ATen, c10, torch, caffe2) and of Python's C API.
FORBIDDEN_HEADER_ROOTS = ("ATen", "c10", "torch", "caffe2", "pybind11", "Python.h", "THC")
FORBIDDEN_CODE = [
    (re.compile(r"\b(at|c10|torch|torch_musa|caffe2|pybind11)\s*::"), "names the {0}:: namespace (torch / the backend)"),
    (re.compile(r"\bPy[A-Z_]\w*"), "uses the Python C API ({0})"),
    (re.compile(r"__attribute__\s*\(\(\s*(weak)\b|#\s*pragma\s+(weak)\b"),
     "declares a weak symbol (a layer above would fill it by interposition; take a callback through a call)"),
    (re.compile(r"\bdlsym\s*\(\s*(RTLD_DEFAULT|RTLD_NEXT)\b"),
     "looks a symbol up in the process's global scope ({0}): that reaches the modules loaded above the runtime"),
]
# Names only the backend's build has: torch's and Python's locations, the backend's targets.
FORBIDDEN_CMAKE = re.compile(
    r"\b(backend\w*|TORCH_MUSA_TORCH_\w+|TORCH_MUSA_PYTHON\w*|TORCH_MUSA_CXX11_ABI|TORCH_MUSA_EXT_SUFFIX"
    r"|TORCH_\w*LIBRAR\w*|Torch\w*|Python\w*|torch_musa_\w+)\b")
FORBIDDEN_NEEDED = re.compile(r"^(libtorch\w*|libc10\w*|libpython\w*|libshm\w*|_C\b.*)")
RUNTIME_LIBS = ("libmusart.so", "libmusa_cuda_driver.so")


def _blank(match):
    """Keeps a removed span's newlines so line numbers still count."""
    return re.sub(r"[^\n]", " ", match.group(0))


def strip_cpp(text):
    """The code with comments and string/char literals blanked out (preprocessor lines kept)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(_blank, text)


def strip_cmake(text):
    return re.sub(r'"(?:\\.|[^"\\])*"|#[^\n]*', _blank, text)


def _line(text, pos):
    return text.count("\n", 0, pos) + 1


def check_sources(root):
    runtime = os.path.join(root, "runtime")
    search = [os.path.join(runtime, "src"), os.path.join(runtime, "include")]
    backend = os.path.join(root, "backend")
    package_include = os.path.join(root, "torch_musa", "include")
    problems = []
    for dirpath, _, files in os.walk(runtime):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXTS):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            code = strip_cpp(text)
            for m in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', text, re.M):
                kind, header = m.group(1), m.group(2).strip()
                where = f"{rel}:{_line(text, m.start())}"
                if code[m.start():m.end()].strip() == "":
                    continue  # inside a comment
                if kind == '"':
                    found = [d for d in [dirpath] + search if os.path.isfile(os.path.join(d, header))]
                    inside = [d for d in found if os.path.realpath(os.path.join(d, header)).startswith(runtime + os.sep)]
                    if not inside:
                        problems.append(f'{where}: #include "{header}" is not a runtime header '
                                        "(runtime/ includes only its own files and system/CUDA headers)")
                    continue
                first = header.split("/")[0]
                if first in FORBIDDEN_HEADER_ROOTS:
                    problems.append(f"{where}: #include <{header}> is a torch/Python header; the runtime has neither")
                elif os.path.isfile(os.path.join(backend, header)) or (
                        os.path.isfile(os.path.join(package_include, header))
                        and not any(os.path.isfile(os.path.join(d, header)) for d in search)):
                    problems.append(f"{where}: #include <{header}> is a backend/package header, not the runtime's")
            for pattern, message in FORBIDDEN_CODE:
                for m in pattern.finditer(code):
                    what = next((g for g in m.groups() if g), m.group(0)) if m.groups() else m.group(0)
                    problems.append(f"{rel}:{_line(code, m.start())}: {message.format(what)}")
    return problems


def check_cmake(root):
    path = os.path.join(root, "runtime", "CMakeLists.txt")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        code = strip_cmake(f.read())
    rel = os.path.relpath(path, root)
    return [f"{rel}:{_line(code, m.start())}: names {m.group(1)}, which belongs to the backend's build "
            "(the runtime builds without torch, Python or backend/)" for m in FORBIDDEN_CMAKE.finditer(code)]


def _tool_lines(args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()


def binary_tools_missing():
    missing = [t for t in ("nm", "readelf") if not shutil.which(t)]
    return f"{' and '.join(missing)} not found (binutils)" if missing else None


def dynamic_symbols(lib, undefined):
    """(name, version or '', weak) of the library's undefined or defined dynamic symbols."""
    out = []
    for line in _tool_lines(["nm", "-D", "--undefined-only" if undefined else "--defined-only", lib]):
        parts = line.split()
        if len(parts) < 2:
            continue
        sym_type, sym = parts[-2], parts[-1]
        name, _, version = sym.partition("@")
        out.append((name, version.lstrip("@"), sym_type in ("w", "v", "W", "V")))
    return out


def check_binary(lib, provided=()):
    """Violations of one built runtime library; `provided`: symbols it may take unversioned."""
    problems = []
    name = os.path.basename(lib)
    for line in _tool_lines(["readelf", "-d", "-W", lib]):
        m = re.search(r"\(NEEDED\).*\[(.+)\]", line)
        if m and FORBIDDEN_NEEDED.match(m.group(1)):
            problems.append(f"{name}: needs {m.group(1)}, a torch/Python library")
    provided = set(provided)
    for sym, version, weak in dynamic_symbols(lib, undefined=True):
        if not version and not weak and sym not in provided:
            problems.append(f"{name}: takes {sym} from no versioned library: a symbol the loading process "
                            "must provide (torch, Python or the backend)")
    return problems


def check_binaries(lib_dir):
    """Violations of the built runtime libraries in lib_dir ([] when none is built there)."""
    runtime = os.path.join(lib_dir, RUNTIME_LIBS[0])
    if not os.path.isfile(runtime):
        return []
    problems = check_binary(runtime)
    own = [s for s, _, _ in dynamic_symbols(runtime, undefined=False)]
    driver = os.path.join(lib_dir, RUNTIME_LIBS[1])
    if os.path.isfile(driver):
        problems += check_binary(driver, provided=own)
    return problems


def main(argv=None):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=repo, help="the repository (holding runtime/ and backend/)")
    ap.add_argument("--lib", default=None, help="folder of the built libmusart.so (default: ROOT/torch_musa)")
    ap.add_argument("--no-binaries", action="store_true", help="check sources and CMake only")
    args = ap.parse_args(argv)
    root = os.path.realpath(args.root)
    problems = check_sources(root) + check_cmake(root)
    if not args.no_binaries:
        missing = binary_tools_missing()
        if missing:
            print(f"binaries not checked: {missing}", file=sys.stderr)
        else:
            problems += check_binaries(args.lib or os.path.join(root, "torch_musa"))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} violation(s): runtime/ must not know torch, Python or backend/; a layer above "
              "registers with the runtime through a documented call instead", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
