// register.cpp: declares the operators course_ext::fused_gelu and course_ext::fused_gelu_backward to
// PyTorch's dispatcher and registers the CUDA kernels of fused_gelu.cu as their CUDA implementation.
//
// Taught in docs/pytorch-extensions/torch-library.md. Built with fused_gelu.cu by
// kernels/pytorch-extensions/setup.py, which kernels/pytorch-extensions/package_gelu.py runs.
//
// course: built-by kernels/pytorch-extensions/package_gelu.py
#include <Python.h>
#include <torch/library.h>
#include <torch/types.h>

namespace course_ext {
torch::Tensor gelu_forward(const torch::Tensor& x);
torch::Tensor gelu_backward(const torch::Tensor& grad, const torch::Tensor& x);
}  // namespace course_ext

// --8<-- [start:library]
// The schema is the operator's contract with the dispatcher and with torch.compile: types, and the
// fact that neither op mutates or aliases its inputs (no "!" or "(a)" annotations).
TORCH_LIBRARY(course_ext, m) {
  m.def("fused_gelu(Tensor x) -> Tensor");
  m.def("fused_gelu_backward(Tensor grad, Tensor x) -> Tensor");
}

// The implementation for tensors on CUDA devices. Other devices have none, so the dispatcher
// itself refuses them with an error naming the backend.
TORCH_LIBRARY_IMPL(course_ext, CUDA, m) {
  m.impl("fused_gelu", &course_ext::gelu_forward);
  m.impl("fused_gelu_backward", &course_ext::gelu_backward);
}
// --8<-- [end:library]

// --8<-- [start:pyinit]
// An empty Python module named _C, so that `import course_ext._C` loads this library (and runs the
// registrations above). No pybind11: the operators are reached through torch.ops.course_ext.
extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", "course_ext's CUDA operators", -1, nullptr,
                               nullptr, nullptr, nullptr, nullptr};
  return PyModule_Create(&module);
}
// --8<-- [end:pyinit]
