// hello_gpu.cu: the first kernel. Every GPU thread says who it is, then the host checks that
// every thread really ran by counting the threads that wrote their mark.
//
// Taught in docs/setup/first-kernel.md.
// Build: nvcc -O2 -arch=native -o build/setup/hello_gpu kernels/setup/hello_gpu.cu
// Run:   ./build/setup/hello_gpu
//
// course: gpu
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/verify.cuh"

// --8<-- [start:kernel]
// __global__ marks a kernel: it runs on the GPU and is launched with <<<...>>> (here from the host).
__global__ void hello(int* marks) {
  const int global_id = blockIdx.x * blockDim.x + threadIdx.x;
  printf("hello from thread %d of block %d (global id %d)\n", threadIdx.x, blockIdx.x, global_id);
  marks[global_id] = global_id + 1;  // proof of work the host can check
}
// --8<-- [end:kernel]

int main(int argc, char** argv) {
  course::Args{argc, argv}.finish();  // no options: anything on the command line is an error
  // --8<-- [start:launch]
  constexpr int kBlocks = 2, kThreadsPerBlock = 4, kThreads = kBlocks * kThreadsPerBlock;
  int* marks = nullptr;
  CUDA_CHECK(cudaMalloc(&marks, kThreads * sizeof(int)));
  CUDA_CHECK(cudaMemset(marks, 0, kThreads * sizeof(int)));

  hello<<<kBlocks, kThreadsPerBlock>>>(marks);  // launches are asynchronous...
  CUDA_CHECK_LAUNCH();                          // ...so check the launch itself,
  CUDA_CHECK(cudaDeviceSynchronize());          // then wait: this also flushes the printf buffer

  int host_marks[kThreads];
  CUDA_CHECK(cudaMemcpy(host_marks, marks, sizeof(host_marks), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(marks));
  // --8<-- [end:launch]

  int expected[kThreads];
  for (int i = 0; i < kThreads; ++i) expected[i] = i + 1;
  return course::check_close("hello_gpu", host_marks, expected, kThreads, 0.0, 0.0) ? 0 : course::kExitFail;
}
