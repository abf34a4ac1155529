// nccl_allreduce.cu: an all-reduce (sum) across every GPU of one machine with NCCL, from one
// process that drives all GPUs (ncclCommInitAll), checked for the right sum, and timed for each
// algorithm NCCL offers, with the algorithm and bus bandwidths reported as nccl-tests defines them.
//
// Taught in docs/libraries/nccl.md. Needs at least 2 GPUs; on fewer it reports itself waived.
// NVLink multicast (NVLS) is switched off: the program sets NCCL_NVLS_ENABLE=0 before NCCL starts.
// Build: nvcc -O3 -arch=native -o build/libraries/nccl_allreduce kernels/libraries/nccl_allreduce.cu -lnccl
// Run:   ./build/libraries/nccl_allreduce                 (checks sums on odd sizes)
//        ./build/libraries/nccl_allreduce --bench         (bus bandwidth for Ring and Tree, 8 KiB to 256 MiB)
//
// course: gpu
// course: gpus 2
// course: libs nccl
// course: sanitizer-expect memcheck memcheck reports cudaErrorNoKernelImageForDevice returned to libnccl while it
//         sets up its communicators (an API error inside libnccl, which it handles; the sums are exact)
// course: sanitizer-expect initcheck the reports are uninitialised reads inside libnccl's own buffers during
//         communication, not in this program's buffers (the sums are exact)
// course: sanitizer-skip synccheck the program aborts under synccheck inside libnccl's communicator initialisation
//         (ncclCommInitAll), before any of this program's kernels run
// The first run, on two GPUs, is the one the sanitizer runs repeat: on a four-GPU H100 machine (2026-11-27)
// memcheck over four ranks did not finish within the GPU run's command; over two ranks it does.
// course: run --count 1000003 --gpus 2
// course: run --count 1000003
// course: run --count 1
// course: bench --bench
// course: measured algbw_gbps busbw_gbps
#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_nccl.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"

// Rank r's input element i: a value whose sum over ranks is known exactly in float (small
// integers), so the check can demand the exact sum.
__global__ void fill_rank(float* x, size_t n, int rank) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = (float)((i * 7 + rank * 3) % 17) - 8.0f;
}

struct Comms {
  int ndev;
  std::vector<ncclComm_t> comm;
  std::vector<cudaStream_t> stream;
};

// --8<-- [start:init]
// One process, one communicator per GPU. ncclCommInitAll is the single-process shortcut; with
// one process per GPU (torchrun, MPI) each rank calls ncclCommInitRank with a shared unique id.
static Comms init_comms(int ndev) {
  Comms c{ndev, std::vector<ncclComm_t>(ndev), std::vector<cudaStream_t>(ndev)};
  std::vector<int> devs(ndev);
  for (int i = 0; i < ndev; ++i) devs[i] = i;
  NCCL_CHECK(ncclCommInitAll(c.comm.data(), ndev, devs.data()));
  for (int i = 0; i < ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaStreamCreate(&c.stream[i]));
  }
  return c;
}

// Every rank must call the collective; from one thread, group the calls so that NCCL launches
// them together instead of waiting in the first for the others.
static void allreduce(const Comms& c, float* const* send, float* const* recv, size_t count) {
  NCCL_CHECK(ncclGroupStart());
  for (int i = 0; i < c.ndev; ++i)
    NCCL_CHECK(ncclAllReduce(send[i], recv[i], count, ncclFloat, ncclSum, c.comm[i], c.stream[i]));
  NCCL_CHECK(ncclGroupEnd());
}
// --8<-- [end:init]

static void sync_all(const Comms& c) {
  for (int i = 0; i < c.ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaStreamSynchronize(c.stream[i]));
  }
}

static void destroy(Comms& c) {
  for (int i = 0; i < c.ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaStreamDestroy(c.stream[i]));
    NCCL_CHECK(ncclCommDestroy(c.comm[i]));
  }
}

static bool check(int ndev, size_t count) {
  Comms c = init_comms(ndev);
  std::vector<float*> send(ndev), recv(ndev);
  for (int i = 0; i < ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaMalloc(&send[i], count * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&recv[i], count * sizeof(float)));
    course::poison(recv[i], count * sizeof(float));
    fill_rank<<<256, 256>>>(send[i], count, i);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  allreduce(c, send.data(), recv.data(), count);
  sync_all(c);
  std::vector<double> want(count);
  for (size_t e = 0; e < count; ++e) {
    want[e] = 0;
    for (int r = 0; r < ndev; ++r) want[e] += (double)((e * 7 + r * 3) % 17) - 8.0;
  }
  bool ok = true;
  std::vector<float> got(count);
  for (int i = 0; i < ndev; ++i) {  // every rank must hold the full sum
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaMemcpy(got.data(), recv[i], count * sizeof(float), cudaMemcpyDeviceToHost));
    char name[48];
    std::snprintf(name, sizeof(name), "allreduce_sum_rank%d_of_%d", i, ndev);
    ok &= course::check_close(name, got.data(), want.data(), count, 0.0, 0.0);
    CUDA_CHECK(cudaFree(send[i]));
    CUDA_CHECK(cudaFree(recv[i]));
  }
  destroy(c);
  return ok;
}

// --8<-- [start:bench]
// For each algorithm: a fresh communicator (NCCL reads NCCL_ALGO when it creates one), then
// all-reduces from 8 KiB to 256 MiB. algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, the
// traffic each GPU's links actually carry in a ring all-reduce, comparable across GPU counts.
// Out of place (as nccl-tests' first column), so that repeats sum the same non-constant inputs
// instead of growing them in place towards infinity.
static void bench(int ndev) {
  const size_t max_count = size_t(1) << 26;  // 256 MiB of floats
  std::vector<float*> send(ndev), recv(ndev);
  for (int i = 0; i < ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaMalloc(&send[i], max_count * sizeof(float)));
    CUDA_CHECK(cudaMalloc(&recv[i], max_count * sizeof(float)));
    fill_rank<<<1024, 256>>>(send[i], max_count, i);
    CUDA_CHECK_LAUNCH();
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  for (const char* algo : {"Ring", "Tree"}) {
    setenv("NCCL_ALGO", algo, 1);
    Comms c = init_comms(ndev);
    for (size_t count = 2048; count <= max_count; count *= 8) {
      for (int w = 0; w < 5; ++w) allreduce(c, send.data(), recv.data(), count);
      sync_all(c);
      const int reps = count >= (size_t(1) << 24) ? 10 : 50;
      CUDA_CHECK(cudaSetDevice(0));
      cudaEvent_t start, stop;
      CUDA_CHECK(cudaEventCreate(&start));
      CUDA_CHECK(cudaEventCreate(&stop));
      CUDA_CHECK(cudaEventRecord(start, c.stream[0]));
      for (int r = 0; r < reps; ++r) allreduce(c, send.data(), recv.data(), count);
      CUDA_CHECK(cudaSetDevice(0));
      CUDA_CHECK(cudaEventRecord(stop, c.stream[0]));
      sync_all(c);
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      CUDA_CHECK(cudaEventDestroy(start));
      CUDA_CHECK(cudaEventDestroy(stop));
      const double t = ms / reps, bytes = (double)count * sizeof(float);
      const double algbw = bytes / (t * 1e6), busbw = algbw * 2.0 * (ndev - 1) / ndev;
      char c_name[64];
      std::snprintf(c_name, sizeof(c_name), "all-reduce, %d GPUs, %.0f KiB", ndev, bytes / 1024);
      std::printf("BENCH {\"case\": \"%s\", \"impl\": \"NCCL %s\", \"time_ms\": %.6g, \"bytes\": %.0f, "
                  "\"flops\": 0, \"peer\": false, \"size_bytes\": %.0f, \"algbw_gbps\": %.4g, \"busbw_gbps\": %.4g, "
                  "\"gpus\": %d}\n", c_name, algo, t, bytes, bytes, algbw, busbw, ndev);
      std::fflush(stdout);
    }
    destroy(c);
  }
  unsetenv("NCCL_ALGO");
  // --8<-- [end:bench]
  for (int i = 0; i < ndev; ++i) {
    CUDA_CHECK(cudaSetDevice(i));
    CUDA_CHECK(cudaFree(send[i]));
    CUDA_CHECK(cudaFree(recv[i]));
  }
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long count = args.get_int("--count", 1000003, 1, 1LL << 28);
  // --gpus N uses the first N GPUs (default 0: all). --gpus 1 runs a one-rank all-reduce, which
  // only proves that the program works on a one-GPU machine.
  const long long want_gpus = args.get_int("--gpus", 0, 0, 1024);
  const bool run_bench = args.has("--bench");
  args.finish();
  // --8<-- [start:env]
  // NVLink multicast (NVLS) stays off on the course's machines; set before NCCL reads it.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  int ndev = 0;
  CUDA_CHECK(cudaGetDeviceCount(&ndev));
  if (want_gpus > 0) ndev = (int)std::min<long long>(ndev, want_gpus);
  if (ndev < 2 && want_gpus != 1) {
    std::printf("WAIVED needs 2 GPUs (this machine has %d)\n", ndev);
    return course::kExitWaived;
  }
  // --8<-- [end:env]
  int version = 0;
  NCCL_CHECK(ncclGetVersion(&version));
  std::printf("NCCL %d (headers %d), %d GPUs\n", version, NCCL_VERSION_CODE, ndev);
  const bool ok = check(ndev, (size_t)count);
  if (ok && run_bench) bench(ndev);
  return ok ? 0 : course::kExitFail;
}
