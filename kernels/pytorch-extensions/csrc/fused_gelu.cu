// fused_gelu.cu: the tanh approximation of GELU, forward and backward, each one CUDA kernel (one
// read of every input, one write of the output), wrapped as functions on torch::Tensor.
//
// Taught in docs/pytorch-extensions/cuda-operator.md. It includes PyTorch's headers, so it is not
// built by plain nvcc: kernels/pytorch-extensions/jit_gelu.py builds it with load_inline, and
// kernels/pytorch-extensions/setup.py (run by kernels/pytorch-extensions/package_gelu.py) builds it
// with CUDAExtension, together with csrc/register.cpp.
//
// course: built-by kernels/pytorch-extensions/package_gelu.py
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>

namespace course_ext {

// --8<-- [start:device_math]
constexpr float kK0 = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kK1 = 0.044715f;

// T is float or double: the arithmetic type (half and bfloat16 inputs are computed in float).
template <typename T>
__device__ __forceinline__ T gelu_value(T x) {
  const T t = tanh(T(kK0) * (x + T(kK1) * x * x * x));
  return T(0.5) * x * (T(1) + t);
}

template <typename T>
__device__ __forceinline__ T gelu_slope(T x) {  // dy/dx
  const T t = tanh(T(kK0) * (x + T(kK1) * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * T(kK0) * (T(1) + T(3) * T(kK1) * x * x);
}
// --8<-- [end:device_math]

// --8<-- [start:kernels]
// Grid-stride loops with 64-bit indices: any grid covers any size, including more than 2^31 elements.
template <typename scalar_t>
__global__ void gelu_forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;  // float for half/bfloat16/float, double for double
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    y[i] = static_cast<scalar_t>(gelu_value(static_cast<opmath_t>(x[i])));
  }
}

template <typename scalar_t>
__global__ void gelu_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ x,
                                     scalar_t* __restrict__ dx, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dx[i] = static_cast<scalar_t>(static_cast<opmath_t>(grad[i]) * gelu_slope(static_cast<opmath_t>(x[i])));
  }
}
// --8<-- [end:kernels]

// --8<-- [start:checks]
// Every way in: check what the kernels assume, and say what is wrong in words (TORCH_CHECK raises a
// Python RuntimeError, TORCH_CHECK_TYPE a TypeError). A kernel fed a CPU pointer would crash instead.
static void check_input(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "fused_gelu: ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK_TYPE(at::isFloatingType(t.scalar_type()),
                   "fused_gelu: ", name, " must be float64, float32, float16 or bfloat16, got ", t.scalar_type());
}

static unsigned blocks_for(int64_t n, int threads) {
  // Enough blocks to fill the GPU several times; the grid-stride loop covers the rest.
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, int64_t{sms} * 32));
}
// --8<-- [end:checks]

// --8<-- [start:host]
torch::Tensor gelu_forward(const torch::Tensor& x) {
  check_input(x, "x");
  const c10::cuda::CUDAGuard guard(x.device());  // launch on x's GPU, not on the current one
  const torch::Tensor xc = x.contiguous();       // the kernel walks memory linearly
  torch::Tensor y = torch::empty(xc.sizes(), xc.options());  // contiguous, like the fake kernel's
  const int64_t n = xc.numel();
  if (n == 0) return y;                          // a grid of zero blocks is a launch error
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "gelu_forward", [&] {
    gelu_forward_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();                // turns a launch error into a Python exception
  return y;
}

torch::Tensor gelu_backward(const torch::Tensor& grad, const torch::Tensor& x) {
  check_input(grad, "grad");
  check_input(x, "x");
  TORCH_CHECK(grad.sizes() == x.sizes(), "fused_gelu backward: grad has shape ", grad.sizes(), ", x has ", x.sizes());
  TORCH_CHECK(grad.device() == x.device(), "fused_gelu backward: grad and x are on different devices");
  TORCH_CHECK_TYPE(grad.scalar_type() == x.scalar_type(), "fused_gelu backward: grad and x dtypes differ");
  const c10::cuda::CUDAGuard guard(x.device());
  const torch::Tensor gc = grad.contiguous(), xc = x.contiguous();
  torch::Tensor dx = torch::empty(xc.sizes(), xc.options());
  const int64_t n = xc.numel();
  if (n == 0) return dx;
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "gelu_backward", [&] {
    gelu_backward_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        gc.data_ptr<scalar_t>(), xc.data_ptr<scalar_t>(), dx.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}
// --8<-- [end:host]

}  // namespace course_ext
