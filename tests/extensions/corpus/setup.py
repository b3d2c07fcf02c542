# The corpus extension built the setup.py way: `python setup.py build_ext --inplace`.
from setuptools import setup

from torch_musa.utils.musa_extension import BuildExtension, MUSAExtension

setup(
    name="musa_corpus_ext",
    ext_modules=[MUSAExtension("musa_corpus_ext", ["ops.cpp", "kernels.mu"],
                               extra_compile_args={"cxx": ["-O2"], "mcc": ["-O3"]})],
    cmdclass={"build_ext": BuildExtension},
)
