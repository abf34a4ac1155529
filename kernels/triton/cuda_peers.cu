// cuda_peers.cu: the CUDA vector add that the Triton chapter's vector add is timed against: float4
// loads and stores (16 bytes per thread per access) in a grid-stride loop over a grid that fills the
// GPU once, the first-kernels chapter's fast version (v3) with v2's grid-stride loop.
//
// Taught in docs/triton/programming-model.md. kernels/triton/bench.py compiles it at run time with
// CuPy (NVRTC) and launches it on PyTorch's tensors, so it includes nothing and has no main. The
// softmax peer is the memory-model chapter's kernels/memory-model/softmax.cuh, loaded the same way.
// Build (syntax check only): nvcc -std=c++17 -O3 -arch=native -c -o build/triton/cuda_peers.o
//                            kernels/triton/cuda_peers.cu
//
// course: compile-only

// --8<-- [start:add]
// a, b and c must be 16-byte aligned (bench.py checks); the n % 4 leftover elements are added one by
// one by the first threads of the grid.
extern "C" __global__ void add_vec4_grid_stride(const float* __restrict__ a, const float* __restrict__ b,
                                                float* __restrict__ c, unsigned long long n) {
  const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  for (unsigned long long i = first; i < n4; i += stride) {
    const float4 x = a4[i], y = b4[i];
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  for (unsigned long long i = 4 * n4 + first; i < n; i += stride) c[i] = a[i] + b[i];
}
// --8<-- [end:add]
