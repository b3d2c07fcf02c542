# A CUDA extension's setup.py: `python setup.py build_ext --inplace`.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="corpus_bias_relu",
    ext_modules=[CUDAExtension("corpus_bias_relu", ["ops.cpp", "kernels.cu"],
                               extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O3", "--use_fast_math"]})],
    cmdclass={"build_ext": BuildExtension},
)
