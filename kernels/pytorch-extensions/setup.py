# setup.py: builds course_ext, the fused GELU of the PyTorch-extensions chapter, as an installable
# package: csrc/fused_gelu.cu and csrc/register.cpp compiled by CUDAExtension into course_ext/_C.
#
# Taught in docs/pytorch-extensions/packaging.md. It needs torch (with CUDA) at build time, so build
# without isolation, from the repository's root:
#   pip install --no-build-isolation --no-deps kernels/pytorch-extensions/
# Its intermediate files go to build/pytorch-extensions/, not into the source tree.
#
# course: built-by kernels/pytorch-extensions/package_gelu.py
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
BUILD = HERE.parent.parent / "build" / "pytorch-extensions" / "setuptools"
BUILD.mkdir(parents=True, exist_ok=True)

# --8<-- [start:extension]
extension = CUDAExtension(
    name="course_ext._C",                            # -> course_ext/_C.<abi>.so, imported by __init__.py
    sources=["csrc/fused_gelu.cu", "csrc/register.cpp"],  # relative to this file, as setuptools wants
    extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3"]},
)

setup(
    name="course-ext",
    version="0.1.0",
    description="The CUDA course's fused GELU operator (PyTorch extension example)",
    packages=["course_ext"],
    ext_modules=[extension],
    cmdclass={"build_ext": BuildExtension},         # nvcc for .cu, the C++ compiler for .cpp, ninja if present
    # Keep build artefacts (objects, build.ninja, the egg-info) out of kernels/.
    options={"build": {"build_base": str(BUILD)}, "egg_info": {"egg_base": str(BUILD)}},
)
# --8<-- [end:extension]
