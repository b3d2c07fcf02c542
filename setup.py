"""Builds torch_musa: the MUSA runtime, its drivers and the torch backend.

Build against the torch that is already installed (never a second one):
    pip install --no-build-isolation -e .
"""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # A stale or half-built torch_musa must not break `import torch` here.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        import torch

        ext_path = os.path.abspath(self.get_ext_fullpath(ext.name))
        out_dir = os.path.dirname(ext_path)
        if getattr(self, "editable_mode", False) or self.inplace:
            # Editable installs import from the source tree: the runtime
            # libraries must sit beside the extension there.
            out_dir = os.path.join(ROOT, "torch_musa")
        build_dir = os.path.join(ROOT, "build", f"py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__.split('+')[0]}")
        os.makedirs(build_dir, exist_ok=True)
        torch_dir = os.path.dirname(torch.__file__)
        includes = [os.path.join(torch_dir, "include"), os.path.join(torch_dir, "include", "torch", "csrc", "api", "include")]
        cmake_args = [
            "cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
            f"-DCMAKE_BUILD_TYPE={os.environ.get('TORCH_MUSA_BUILD_TYPE', 'Release')}",
            f"-DCMAKE_LIBRARY_OUTPUT_DIRECTORY={out_dir}",
            f"-DTORCH_MUSA_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
            f"-DTORCH_MUSA_TORCH_INCLUDES={';'.join(includes)}",
            f"-DTORCH_MUSA_TORCH_LIB_DIR={os.path.join(torch_dir, 'lib')}",
            f"-DTORCH_MUSA_PYTHON_INCLUDE={sysconfig.get_paths()['include']}",
            f"-DTORCH_MUSA_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-DTORCH_MUSA_TORCH_HAS_CUDA={'ON' if torch.version.cuda else 'OFF'}",
        ]
        if os.environ.get("TORCH_MUSA_NO_CUDA"):
            cmake_args.append("-DTORCH_MUSA_BUILD_CUDA_DRIVER=OFF")
        subprocess.check_call(cmake_args)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--", f"-j{jobs}"])
        # What this build was made for: torch_musa checks it at import (a wheel moved to another torch
        # gets a clear error instead of undefined symbols).
        with open(os.path.join(out_dir, "_build_info.py"), "w") as f:
            f.write('"""Written by setup.py at build time."""\n')
            f.write(f"TORCH_VERSION = {torch.__version__.split('+')[0]!r}\n")
            f.write(f"TORCH_CUDA = {torch.version.cuda!r}\n")
        # Extensions compiled for the host driver include the runtime's header: it ships in the
        # package beside the extension headers (torch_musa/include, found by include_paths()).
        rt_include = os.path.join(out_dir, "include", "musa")
        os.makedirs(rt_include, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, "runtime", "include", "musa", "runtime.h"), rt_include)
        built = os.path.join(out_dir, os.path.basename(ext_path))
        if os.path.abspath(built) != ext_path:  # setuptools copies it from build-lib
            os.makedirs(os.path.dirname(ext_path), exist_ok=True)
            shutil.copy2(built, ext_path)


def built_for_torch():
    """The installed torch's public version: the wheel pins it (an extension works with its torch only)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return re.sub(r"\+.*", "", version("torch"))
    except PackageNotFoundError:  # metadata without torch (e.g. an isolated sdist step): no pin
        return None


TORCH_BUILT_FOR = built_for_torch()

setup(
    name="torch_musa",
    # The local label names the torch the binary was built for (one wheel per torch release).
    version="0.1.0" + (f"+torch{TORCH_BUILT_FOR}" if TORCH_BUILT_FOR else ""),
    install_requires=[f"torch=={TORCH_BUILT_FOR}"] if TORCH_BUILT_FOR else [],
    description="torch.device('musa') for stock PyTorch: MUSA runtime, host and cuda drivers",
    packages=find_packages(include=["torch_musa", "torch_musa.*"]),
    # Headers for extension code (MUSAExtension / load_inline): torch_musa/include.
    package_data={"torch_musa": ["include/*.h", "include/**/*.h"]},
    ext_modules=[CMakeExtension("torch_musa._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    entry_points={
        "torch.backends": ["torch_musa = torch_musa:_autoload"],
        "console_scripts": [
            "musa-converter = torch_musa.utils.musa_converter:main",
            "mcc = torch_musa.utils.musa_extension.mcc:main",
        ],
    },
    zip_safe=False,
)
