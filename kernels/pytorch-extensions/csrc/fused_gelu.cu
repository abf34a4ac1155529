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
#include <cstdint>
#include <initializer_list>

namespace course_ext {

// --8<-- [start:device_math]
// Double constants: T(kK0) rounds them to float for float arithmetic and keeps every digit for double
// (float constants would limit the float64 path to float precision).
constexpr double kK0 = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kK1 = 0.044715;

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
// Each thread moves kVec elements per load and per store: 16 bytes (4 floats, 8 halves, 2 doubles) when
// the host found every pointer 16-byte aligned, else one element (kVec = 1). Wide accesses issue a
// quarter of the memory instructions of 4-byte ones and keep more bytes in flight per thread, which is
// what an elementwise kernel needs to reach the memory bandwidth. Grid-stride loops with 64-bit
// indices: any grid covers any size, including more than 2^31 elements.
template <typename scalar_t, int kVec>
struct alignas(sizeof(scalar_t) * kVec) Pack {
  scalar_t v[kVec];
};

template <typename scalar_t, int kVec>
__global__ void gelu_forward_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;  // float for half/bfloat16/float, double for double
  using P = Pack<scalar_t, kVec>;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = n / kVec;
  for (int64_t p = first; p < packs; p += stride) {
    const P in = reinterpret_cast<const P*>(x)[p];
    P out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) out.v[j] = static_cast<scalar_t>(gelu_value(static_cast<opmath_t>(in.v[j])));
    reinterpret_cast<P*>(y)[p] = out;
  }
  for (int64_t i = packs * kVec + first; i < n; i += stride)  // the last n % kVec elements
    y[i] = static_cast<scalar_t>(gelu_value(static_cast<opmath_t>(x[i])));
}

template <typename scalar_t, int kVec>
__global__ void gelu_backward_kernel(const scalar_t* __restrict__ grad, const scalar_t* __restrict__ x,
                                     scalar_t* __restrict__ dx, int64_t n) {
  using opmath_t = at::opmath_type<scalar_t>;
  using P = Pack<scalar_t, kVec>;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t packs = n / kVec;
  for (int64_t p = first; p < packs; p += stride) {
    const P g = reinterpret_cast<const P*>(grad)[p];
    const P in = reinterpret_cast<const P*>(x)[p];
    P out;
#pragma unroll
    for (int j = 0; j < kVec; ++j)
      out.v[j] = static_cast<scalar_t>(static_cast<opmath_t>(g.v[j]) * gelu_slope(static_cast<opmath_t>(in.v[j])));
    reinterpret_cast<P*>(dx)[p] = out;
  }
  for (int64_t i = packs * kVec + first; i < n; i += stride)
    dx[i] = static_cast<scalar_t>(static_cast<opmath_t>(grad[i]) * gelu_slope(static_cast<opmath_t>(x[i])));
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

// 16-byte accesses need 16-byte-aligned addresses. PyTorch's allocator returns aligned blocks, but a
// contiguous view can start anywhere inside one (x[1:] of a float tensor starts 4 bytes in).
static bool aligned16(std::initializer_list<const void*> ptrs) {
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

static unsigned blocks_for(int64_t n, int threads, int elems_per_thread) {
  // Enough blocks to fill the GPU several times; the grid-stride loop covers the rest.
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t per_block = int64_t{threads} * elems_per_thread;
  return static_cast<unsigned>(std::min<int64_t>((n + per_block - 1) / per_block, int64_t{sms} * 32));
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
    constexpr int kWide = 16 / sizeof(scalar_t);
    const scalar_t* in = xc.data_ptr<scalar_t>();
    scalar_t* out = y.data_ptr<scalar_t>();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (aligned16({in, out}))
      gelu_forward_kernel<scalar_t, kWide><<<blocks_for(n, kThreads, kWide), kThreads, 0, stream>>>(in, out, n);
    else
      gelu_forward_kernel<scalar_t, 1><<<blocks_for(n, kThreads, 1), kThreads, 0, stream>>>(in, out, n);
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
    constexpr int kWide = 16 / sizeof(scalar_t);
    const scalar_t* g = gc.data_ptr<scalar_t>();
    const scalar_t* in = xc.data_ptr<scalar_t>();
    scalar_t* out = dx.data_ptr<scalar_t>();
    const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (aligned16({g, in, out}))
      gelu_backward_kernel<scalar_t, kWide><<<blocks_for(n, kThreads, kWide), kThreads, 0, stream>>>(g, in, out, n);
    else
      gelu_backward_kernel<scalar_t, 1><<<blocks_for(n, kThreads, 1), kThreads, 0, stream>>>(g, in, out, n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}
// --8<-- [end:host]

}  // namespace course_ext
