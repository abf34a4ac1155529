// vector_add_kernel.cu: the vector-add kernel on its own, with C linkage and no main, for CuPy to
// compile at run time (NVRTC) and launch from Python. It is add_v1 of vector_add.cu.
//
// Taught in docs/first-kernels/python.md; loaded by kernels/first-kernels/vector_add_cupy.py.
// Build: nvcc -O3 -arch=native -c -o build/first-kernels/vector_add_kernel.o
//        kernels/first-kernels/vector_add_kernel.cu
//        (only to check it compiles; CuPy compiles it itself)
//
// course: compile-only
// --8<-- [start:kernel]
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned long long n) {
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
// --8<-- [end:kernel]
