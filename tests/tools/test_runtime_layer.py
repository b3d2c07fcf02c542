"""The runtime (runtime/) knows nothing of backend/, torch or Python: scripts/check_runtime_layer.py
passes on this tree and names each way a loop back into the backend could come in."""
import importlib.util
import os

import pytest

from tests.tools.conftest import REPO, run_python

SCRIPT = REPO / "scripts" / "check_runtime_layer.py"


@pytest.fixture(scope="module")
def layer():
    spec = importlib.util.spec_from_file_location("_check_runtime_layer", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runtime_sources_and_cmake_stand_alone(layer):
    assert layer.check_sources(str(REPO)) == []
    assert layer.check_cmake(str(REPO)) == []


def test_script_exit_status_on_this_tree():
    r = run_python([str(SCRIPT)], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_each_way_back_into_the_backend_is_named(layer, tmp_path):
    _write(tmp_path / "backend" / "ops" / "delegation.h", "#pragma once\n")
    _write(tmp_path / "runtime" / "include" / "musa" / "runtime.h", "#pragma once\n")
    _write(tmp_path / "runtime" / "src" / "driver.h", "#pragma once\n")
    _write(tmp_path / "runtime" / "src" / "runtime.cpp", "\n".join([
        '#include "driver.h"',                 # 1: own header
        "#include <musa/runtime.h>",           # 2: own public header
        "#include <vector>",                   # 3: system
        '#include "../../backend/ops/delegation.h"',  # 4
        "#include <ops/delegation.h>",         # 5: found under backend/
        "#include <ATen/core/Tensor.h>",       # 6
        "// c10::Device and #include <torch/library.h> in a comment are text",  # 7
        'const char* s = "at::Tensor, PyObject";',  # 8: a string is text
        "void f() { c10::Device d; }",         # 9
        "int g() { return PyGILState_Check(); }",  # 10
        "extern void hook() __attribute__((weak));",  # 11
        'void* h() { return dlsym(RTLD_DEFAULT, "torch_musa_hook"); }',  # 12
        'void* k(void* p) { return dlsym(p, "musa_make_cuda_driver"); }',  # 13: a handle the runtime opened
    ]) + "\n")
    found = layer.check_sources(str(tmp_path))
    lines = sorted(int(p.split(":")[1]) for p in found)
    assert lines == [4, 5, 6, 9, 10, 11, 12], found
    assert any("c10:: namespace" in p for p in found)
    assert any("Python C API (PyGILState_Check)" in p for p in found)
    assert any("weak symbol" in p for p in found)
    assert any("RTLD_DEFAULT" in p for p in found)

    _write(tmp_path / "runtime" / "CMakeLists.txt", "\n".join([
        'message(STATUS "torch_musa: backend in a message is text")  # and ${TORCH_MUSA_TORCH_INCLUDES} in a comment',
        "add_library(musart SHARED src/runtime.cpp)",
        "target_include_directories(musart PRIVATE ${TORCH_MUSA_TORCH_INCLUDES} ${CMAKE_SOURCE_DIR}/backend)",
        "target_link_libraries(musart PRIVATE torch_musa_backend_flags)",
    ]) + "\n")
    cmake = layer.check_cmake(str(tmp_path))
    assert sorted(p.split(": names ")[1].split(",")[0] for p in cmake) == [
        "TORCH_MUSA_TORCH_INCLUDES", "backend", "torch_musa_backend_flags"], cmake
    assert all(p.startswith(os.path.join("runtime", "CMakeLists.txt") + ":") for p in cmake)

    r = run_python([str(SCRIPT), "--root", str(tmp_path), "--no-binaries"], timeout=60)
    assert r.returncode == 1 and len(r.stdout.splitlines()) == len(found) + len(cmake), r.stdout + r.stderr


def _built(name):
    path = REPO / "torch_musa" / name
    if not path.is_file():
        pytest.skip(f"{name} is not built in torch_musa/ (bash scripts/setup.sh)")
    return str(path)


def test_built_runtime_needs_nothing_from_the_layers_above(layer):
    if layer.binary_tools_missing():
        pytest.skip(layer.binary_tools_missing())
    _built("libmusart.so")
    assert layer.check_binaries(str(REPO / "torch_musa")) == []


def test_binary_check_names_torch_and_python_dependencies(layer):
    # The backend extension is what a runtime linked against the layers above would look like.
    if layer.binary_tools_missing():
        pytest.skip(layer.binary_tools_missing())
    ext = next((p for p in (REPO / "torch_musa").glob("_C*.so")), None)
    if ext is None:
        pytest.skip("torch_musa._C is not built (bash scripts/setup.sh)")
    found = layer.check_binary(str(ext))
    assert any("needs libc10" in p for p in found), found[:5]
    assert any("takes Py" in p for p in found), found[:5]
