// whoami.cu: every thread works out who it is (its block, its place in the block, its global index)
// in 1D, 2D and 3D launches; the host checks the index arithmetic element by element. Also shows a
// grid-stride loop with a fixed, small grid, and that the runtime rejects launches beyond its limits.
//
// INVALID LAUNCHES ON PURPOSE: check_limits() launches one block of maxThreadsPerBlock + 1 threads
// and a grid one block taller than maxGridSize[1] allows. The runtime must refuse both (the check
// passes only if it does); a sanitizer run reports them as launch errors, which is what they are.
//
// Taught in docs/first-kernels/indexing.md.
// Build: nvcc -O3 -arch=native -o build/first-kernels/whoami kernels/first-kernels/whoami.cu
// Run:   ./build/first-kernels/whoami --nx 37 --ny 19 --nz 5   (sizes of the 3D volume)
//        ./build/first-kernels/whoami --print                  (a tiny 2D launch that prints)
//
// course: gpu
// course: run --nx 37 --ny 19 --nz 5 --n 1000003
// course: run --nx 1 --ny 1 --nz 1 --n 1
// course: run --nx 131 --ny 7 --nz 3 --n 257 --print
// course: sanitizer-expect memcheck its two deliberately invalid launches (a block of 1025 threads, a grid of 65536
//         blocks in y) are reported as CUDA API errors
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"

// --8<-- [start:print]
// A 2D grid of 2D blocks, each thread printing its coordinates. Only for tiny launches.
__global__ void whoami_print() {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  printf("block (%d,%d) thread (%d,%d) -> row %d col %d\n", blockIdx.x, blockIdx.y, threadIdx.x,
         threadIdx.y, row, col);
}
// --8<-- [end:print]

// --8<-- [start:index1d]
// 1D: one thread per element. The grid is rounded up to whole blocks, so the last block has threads
// past the end: the boundary check keeps them from writing out of bounds.
__global__ void index_1d(int* global_id, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) global_id[i] = i;
}
// --8<-- [end:index1d]

// --8<-- [start:index3d]
// 3D: a volume of nx * ny * nz cells stored x-fastest. Each thread finds its cell (x, y, z), and
// records which block it is in and which thread of that block it is, both as linear numbers.
__global__ void index_3d(int* block_of_cell, int* thread_of_cell, int nx, int ny, int nz) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= nx || y >= ny || z >= nz) return;  // the grid overhangs the volume on every axis
  const size_t cell = (static_cast<size_t>(z) * ny + y) * nx + x;
  const int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
  const int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  block_of_cell[cell] = block;
  thread_of_cell[cell] = thread;
}
// --8<-- [end:index3d]

// --8<-- [start:grid_stride]
// Grid-stride loop: the grid covers `stride` elements per pass and walks over the array until it is
// done, so any grid size handles any n. Indices are size_t: an int overflows past 2^31 elements.
__global__ void fill_grid_stride(float* out, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    out[i] = static_cast<float>(i % 1000);
  }
}
// --8<-- [end:grid_stride]

static bool check_1d(int n) {
  int* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, n * sizeof(int)));
  CUDA_CHECK(cudaMemset(d, 0xFF, n * sizeof(int)));  // -1 everywhere: an unwritten element fails
  // --8<-- [start:launch1d]
  const int threads = 256;
  const int blocks = course::ceil_div(n, threads);  // round up: n = 1000 needs 4 blocks, not 3
  index_1d<<<blocks, threads>>>(d, n);
  CUDA_CHECK_LAUNCH();
  // --8<-- [end:launch1d]
  std::vector<int> got(n), want(n);
  CUDA_CHECK(cudaMemcpy(got.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  for (int i = 0; i < n; ++i) want[i] = i;
  return course::check_close("index_1d", got.data(), want.data(), n, 0.0, 0.0);
}

static bool check_3d(int nx, int ny, int nz) {
  const size_t cells = static_cast<size_t>(nx) * ny * nz;
  int *d_block = nullptr, *d_thread = nullptr;
  CUDA_CHECK(cudaMalloc(&d_block, cells * sizeof(int)));
  CUDA_CHECK(cudaMalloc(&d_thread, cells * sizeof(int)));
  CUDA_CHECK(cudaMemset(d_block, 0xFF, cells * sizeof(int)));
  CUDA_CHECK(cudaMemset(d_thread, 0xFF, cells * sizeof(int)));
  // --8<-- [start:launch3d]
  const dim3 block(8, 4, 2);  // 64 threads per block
  const dim3 grid(course::ceil_div<unsigned>(nx, block.x), course::ceil_div<unsigned>(ny, block.y),
                  course::ceil_div<unsigned>(nz, block.z));
  index_3d<<<grid, block>>>(d_block, d_thread, nx, ny, nz);
  CUDA_CHECK_LAUNCH();
  // --8<-- [end:launch3d]
  std::vector<int> got_block(cells), got_thread(cells), want_block(cells), want_thread(cells);
  CUDA_CHECK(cudaMemcpy(got_block.data(), d_block, cells * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(got_thread.data(), d_thread, cells * sizeof(int), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_block));
  CUDA_CHECK(cudaFree(d_thread));
  // The CPU does the same arithmetic from the other end: from a cell to its block and thread.
  for (int z = 0; z < nz; ++z)
    for (int y = 0; y < ny; ++y)
      for (int x = 0; x < nx; ++x) {
        const size_t cell = (static_cast<size_t>(z) * ny + y) * nx + x;
        const int bx = x / block.x, by = y / block.y, bz = z / block.z;
        const int tx = x % block.x, ty = y % block.y, tz = z % block.z;
        want_block[cell] = (bz * grid.y + by) * grid.x + bx;
        want_thread[cell] = (tz * block.y + ty) * block.x + tx;
      }
  const bool a = course::check_close("index_3d_block", got_block.data(), want_block.data(), cells, 0.0, 0.0);
  const bool b = course::check_close("index_3d_thread", got_thread.data(), want_thread.data(), cells, 0.0, 0.0);
  return a && b;
}

static bool check_grid_stride(size_t n) {
  float* d = nullptr;
  CUDA_CHECK(cudaMalloc(&d, n * sizeof(float)));
  course::poison(d, n * sizeof(float));
  fill_grid_stride<<<4, 128>>>(d, n);  // 512 threads in all, whatever n is
  CUDA_CHECK_LAUNCH();
  std::vector<float> got(n), want(n);
  CUDA_CHECK(cudaMemcpy(got.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d));
  for (size_t i = 0; i < n; ++i) want[i] = static_cast<float>(i % 1000);
  return course::check_close("grid_stride", got.data(), want.data(), n, 0.0, 0.0);
}

// --8<-- [start:limits]
// The runtime refuses a launch beyond the device's limits, and says so only through
// cudaGetLastError: the launch statement itself returns nothing.
static bool check_limits() {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("maxThreadsPerBlock %d, maxThreadsDim (%d, %d, %d), maxGridSize (%d, %d, %d)\n",
              prop.maxThreadsPerBlock, prop.maxThreadsDim[0], prop.maxThreadsDim[1], prop.maxThreadsDim[2],
              prop.maxGridSize[0], prop.maxGridSize[1], prop.maxGridSize[2]);
  // One thread too many per block.
  index_1d<<<1, prop.maxThreadsPerBlock + 1>>>(nullptr, 0);
  const cudaError_t too_many_threads = cudaGetLastError();  // reading it also clears it
  std::printf("block of %d threads: %s\n", prop.maxThreadsPerBlock + 1, cudaGetErrorName(too_many_threads));
  // A grid one block taller than gridDim.y allows.
  index_3d<<<dim3(1, prop.maxGridSize[1] + 1u, 1), dim3(1, 1, 1)>>>(nullptr, nullptr, 0, 0, 0);
  const cudaError_t too_many_blocks = cudaGetLastError();
  std::printf("grid of %u blocks in y: %s\n", prop.maxGridSize[1] + 1u, cudaGetErrorName(too_many_blocks));
  // Both launches must have been refused, and the device must still work (these errors are not sticky).
  const bool refused = too_many_threads != cudaSuccess && too_many_blocks != cudaSuccess;
  const bool still_works = cudaDeviceSynchronize() == cudaSuccess;
  return course::check_true("launch_limits_enforced", refused && still_works, 3);
}
// --8<-- [end:limits]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  // Sizes that fit: the 3D volume at most 2^28 cells (each axis at most 2^14), n at most 2^30.
  const long long nx = args.get_int("--nx", 37, 1, 1 << 14), ny = args.get_int("--ny", 19, 1, 1 << 14),
                  nz = args.get_int("--nz", 5, 1, 1 << 14);
  const long long n = args.get_int("--n", 1000003, 1, 1LL << 30);
  const bool print = args.has("--print");
  args.finish();
  if (nx * ny * nz > (1LL << 28)) {
    std::fprintf(stderr, "error: --nx * --ny * --nz must be at most 2^28 (got %lld)\n", nx * ny * nz);
    return course::kExitFail;
  }
  if (print) {
    // --8<-- [start:print_launch]
    whoami_print<<<dim3(2, 2), dim3(2, 2)>>>();  // 4 blocks of 4 threads, a 4 x 4 grid of threads
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());  // device printf output appears when the host waits
    // --8<-- [end:print_launch]
  }
  bool ok = check_1d(static_cast<int>(n));
  ok = check_3d(static_cast<int>(nx), static_cast<int>(ny), static_cast<int>(nz)) && ok;
  ok = check_grid_stride(static_cast<size_t>(n)) && ok;
  ok = check_limits() && ok;
  return ok ? 0 : course::kExitFail;
}
