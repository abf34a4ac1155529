// allreduce_p2p.cu: an all-reduce (sum, fp32) of our own over NVLink: every GPU's kernel reads the other
// GPUs' buffers directly (peer-to-peer), with flags in GPU memory, stored with release and loaded with
// acquire at system scope, as the only synchronisation between the GPUs. Checked exactly against the
// integer sum (and NCCL's result), then timed against NCCL in the same process.
//
// Taught in docs/many-gpus/own-allreduce.md. Needs at least 2 GPUs of one machine that can access each
// other's memory; on fewer it reports itself waived. One process drives every GPU (as nccl_allreduce.cu):
// with peer access enabled, a pointer from cudaMalloc on one GPU is valid in kernels on all of them.
// Build: nvcc -O3 -arch=native -o build/many-gpus/allreduce_p2p kernels/many-gpus/allreduce_p2p.cu -lnccl
// Run:   ./build/many-gpus/allreduce_p2p                 (checks both kernels and NCCL on odd sizes)
//        ./build/many-gpus/allreduce_p2p --bench         (times them and NCCL, 1 KiB to 1 GiB)
//
//   one-shot  every GPU reads all n buffers and sums them: one step, (n - 1) S bytes in per GPU
//   two-shot  GPU r sums its 1/n share from all n buffers, then copies the other shares from the GPUs
//             that summed them: a reduce-scatter then an all-gather, 2 (n - 1) / n S bytes in per GPU
//
// course: gpu
// course: gpus 2
// course: libs nccl
// course: run --count 1000003 --gpus 1 --no-nccl --seed 11
// course: run --count 1000003 --seed 14
// course: run --count 1 --seed 12
// course: run --count 4099 --seed 13
// course: bench --bench
// course: measured algbw_gbps busbw_gbps busbw_gbps_*
#include <cuda/atomic>

#include <algorithm>
#include <string>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/check_nccl.cuh"
#include "../common/memory.cuh"
#include "../common/verify.cuh"

constexpr int kMaxRanks = 8;
constexpr int kMaxBlocks = 256;
constexpr int kThreads = 512;
constexpr unsigned long long kTimeoutNs = 20ull * 1000 * 1000 * 1000;  // a peer that never arrives: fail, not hang

// What every rank's kernel needs: every rank's buffers and flags (pointers valid on every GPU).
struct Peers {
  const float* in[kMaxRanks];
  float* out[kMaxRanks];
  uint32_t* flags[kMaxRanks];  // rank r's flags[block * kMaxRanks + s]: the last barrier value s sent it
  int* status[kMaxRanks];      // nonzero: a barrier of that rank timed out
};

// Rank `rank`'s input element i: a small integer from a hash of (seed, rank, i), the same on host and
// device, so that sums over up to 8 ranks are exact in fp32 and the check can demand the exact sum.
__host__ __device__ inline float input_value(uint64_t seed, int rank, size_t i) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull + i;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<float>(static_cast<int>(x % 129) - 64);
}

__global__ void fill_input(float* x, size_t n, uint64_t seed, int rank) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    x[i] = input_value(seed, rank, i);
}

__device__ inline unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// --8<-- [start:barrier]
// A barrier between the blocks with this block's index on every rank. Thread s < n stores `value` into
// rank s's flag slot for (this block, this rank) with release semantics at system scope: every write and
// read this block made before the __syncthreads is visible to (and finished for) whoever acquires the flag.
// Then it waits until rank s has stored `value` (or more) into this rank's slot for (this block, s), with
// acquire semantics: what rank s's block did before its store is visible here. Values only grow (each
// call passes larger ones), so the flags never need resetting and a fast rank cannot be mistaken for
// one that is a whole call behind.
__device__ void barrier(const Peers& p, int rank, int nranks, uint32_t value) {
  __syncthreads();
  const int s = threadIdx.x;
  if (s < nranks) {
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system> to_peer(p.flags[s][blockIdx.x * kMaxRanks + rank]);
    to_peer.store(value, cuda::memory_order_release);
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system> from_peer(p.flags[rank][blockIdx.x * kMaxRanks + s]);
    const unsigned long long start = now_ns();
    while (from_peer.load(cuda::memory_order_acquire) < value) {
      // A peer whose kernel never comes: record it and go on, so the program fails instead of hanging
      // (and once one barrier has timed out, the later ones do not wait again).
      if (*reinterpret_cast<volatile int*>(p.status[rank]) != 0) break;
      if (now_ns() - start > kTimeoutNs) {
        atomicExch(p.status[rank], 1 + s);
        break;
      }
    }
  }
  __syncthreads();
}
// --8<-- [end:barrier]

// --8<-- [start:one_shot]
// Vector i (16 bytes) summed over the n inputs: every load issued before the first add, so all n are in
// flight at once, then the adds in rank order 0..n-1 on every rank (so every rank gets the same bits).
template <int kRanks>
__device__ __forceinline__ float4 sum_over_ranks(const Peers& p, size_t i) {
  float4 v[kRanks];
#pragma unroll
  for (int s = 0; s < kRanks; ++s) v[s] = reinterpret_cast<const float4*>(p.in[s])[i];
  float4 acc = v[0];
#pragma unroll
  for (int s = 1; s < kRanks; ++s) {
    acc.x += v[s].x;
    acc.y += v[s].y;
    acc.z += v[s].z;
    acc.w += v[s].w;
  }
  return acc;
}

// The last count % 4 elements, which no 16-byte vector covers: every rank sums them itself.
template <int kRanks>
__device__ __forceinline__ void sum_tail(const Peers& p, int rank, size_t count, size_t first, size_t stride) {
  for (size_t i = 4 * (count / 4) + first; i < count; i += stride) {
    float acc = p.in[0][i];
    for (int s = 1; s < kRanks; ++s) acc += p.in[s][i];
    p.out[rank][i] = acc;
  }
}

// One-shot: after a barrier (every rank's kernel has started, so every input is complete), each thread
// sums 16 bytes from each of the n inputs, in rank order 0..n-1 on every rank (so every rank gets the
// same bits), and writes them to its own output. The closing barrier keeps any rank from leaving while a
// peer still reads its input (the caller may overwrite it as soon as the kernel ends).
template <int kRanks>
__global__ void __launch_bounds__(kThreads) one_shot(Peers p, int rank, size_t count, uint32_t epoch) {
  barrier(p, rank, kRanks, 4 * epoch + 1);
  const size_t nvec = count / 4;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  float4* out = reinterpret_cast<float4*>(p.out[rank]);
  for (size_t i = first; i < nvec; i += stride) out[i] = sum_over_ranks<kRanks>(p, i);
  sum_tail<kRanks>(p, rank, count, first, stride);
  barrier(p, rank, kRanks, 4 * epoch + 2);
}
// --8<-- [end:one_shot]

// --8<-- [start:two_shot]
// Two-shot: rank r owns share r of the vectors. Phase 1 (reduce-scatter): it sums its share from all n
// inputs into its own output. A barrier: every rank's share is summed. Phase 2 (all-gather): it copies
// every other share from the output of the rank that owns it. Thread i of block b touches the same
// offsets within every share, so phase 2 of block b reads only what block b of the owner wrote in phase
// 1, and a barrier between blocks of one index is enough (no grid-wide barrier). The last count % 4
// elements are summed by every rank itself, as in one-shot.
template <int kRanks>
__global__ void __launch_bounds__(kThreads) two_shot(Peers p, int rank, size_t count, uint32_t epoch) {
  barrier(p, rank, kRanks, 4 * epoch + 1);
  const size_t nvec = count / 4;
  const size_t share = course::ceil_div<size_t>(nvec, kRanks);  // vectors per rank (the last share is shorter)
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  float4* out = reinterpret_cast<float4*>(p.out[rank]);
  const size_t mine = rank * share;
  for (size_t j = first; j < share && mine + j < nvec; j += stride)
    out[mine + j] = sum_over_ranks<kRanks>(p, mine + j);
  sum_tail<kRanks>(p, rank, count, first, stride);
  barrier(p, rank, kRanks, 4 * epoch + 2);
  for (size_t j = first; j < share; j += stride) {
    float4 v[kRanks];
#pragma unroll
    for (int s = 0; s < kRanks; ++s) {  // every other share: all loads first, so they are in flight at once
      const size_t at = s * share + j;
      v[s] = s != rank && at < nvec ? reinterpret_cast<const float4*>(p.out[s])[at] : make_float4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < kRanks; ++s) {
      const size_t at = s * share + j;
      if (s != rank && at < nvec) out[at] = v[s];
    }
  }
  barrier(p, rank, kRanks, 4 * epoch + 3);
}
// --8<-- [end:two_shot]

// The GPUs of one all-reduce group: streams, buffers, flags, NCCL communicators.
struct Group {
  int n = 0, sms = 0;
  size_t capacity = 0;  // elements per buffer
  uint32_t epoch = 0;
  Peers peers{};
  std::vector<cudaStream_t> stream;
  std::vector<ncclComm_t> comm;
  std::vector<float*> nccl_out;
};

// --8<-- [start:peer_access]
// Every pair of GPUs must reach each other's memory (NVLink, or PCIe peer-to-peer): then a kernel on
// GPU a may dereference a pointer that cudaMalloc returned on GPU b.
static bool enable_peer_access(int n) {
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) {
        std::printf("WAIVED GPU %d cannot access the memory of GPU %d (no peer-to-peer path)\n", a, b);
        return false;
      }
      CUDA_CHECK(cudaSetDevice(a));
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // clear it: enabled already is what we want
      } else {
        CUDA_CHECK(e);
      }
    }
  return true;
}
// --8<-- [end:peer_access]

static Group make_group(int n, size_t capacity, bool with_nccl) {
  Group g;
  g.n = n;
  g.capacity = capacity;
  g.stream.resize(n);
  for (int r = 0; r < n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.stream[r], cudaStreamNonBlocking));
    float* in = course::device_alloc<float>(capacity);
    g.peers.in[r] = in;
    g.peers.out[r] = course::device_alloc<float>(capacity);
    g.peers.flags[r] = course::device_alloc<uint32_t>(kMaxBlocks * kMaxRanks);
    CUDA_CHECK(cudaMemset(g.peers.flags[r], 0, kMaxBlocks * kMaxRanks * sizeof(uint32_t)));
    g.peers.status[r] = course::device_alloc<int>(1);
    CUDA_CHECK(cudaMemset(g.peers.status[r], 0, sizeof(int)));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, 0));
  if (with_nccl) {
    g.comm.resize(n);
    std::vector<int> devs(n);
    for (int r = 0; r < n; ++r) devs[r] = r;
    NCCL_CHECK(ncclCommInitAll(g.comm.data(), n, devs.data()));
    for (int r = 0; r < n; ++r) {
      CUDA_CHECK(cudaSetDevice(r));
      g.nccl_out.push_back(course::device_alloc<float>(capacity));
    }
  }
  return g;
}

static void destroy_group(Group& g) {
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaStreamSynchronize(g.stream[r]));
    if (!g.comm.empty()) {
      NCCL_CHECK(ncclCommDestroy(g.comm[r]));
      CUDA_CHECK(cudaFree(g.nccl_out[r]));
    }
    course::device_free({g.peers.in[r], g.peers.out[r], g.peers.flags[r], g.peers.status[r]});
    CUDA_CHECK(cudaStreamDestroy(g.stream[r]));
  }
}

enum class Algo { kOneShot, kTwoShot, kNccl };

template <int kRanks>
static void launch_ours(Group& g, Algo algo, size_t count, int blocks) {
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    if (algo == Algo::kOneShot)
      one_shot<kRanks><<<blocks, kThreads, 0, g.stream[r]>>>(g.peers, r, count, g.epoch);
    else
      two_shot<kRanks><<<blocks, kThreads, 0, g.stream[r]>>>(g.peers, r, count, g.epoch);
    CUDA_CHECK_LAUNCH();
  }
}

// --8<-- [start:launch]
// One all-reduce of `count` floats, in[r] -> out[r] on every rank. Ours: one kernel per GPU, launched
// from this thread one GPU after the other; the kernels find each other through the flags. The grid
// is as small as the work allows (a 1 KiB all-reduce needs one block) and at most one block per SM,
// so that every block of every rank is resident at once and no block waits for one never scheduled.
static void allreduce(Group& g, Algo algo, size_t count) {
  if (algo == Algo::kNccl) {
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < g.n; ++r)
      NCCL_CHECK(ncclAllReduce(g.peers.in[r], g.nccl_out[r], count, ncclFloat, ncclSum, g.comm[r], g.stream[r]));
    NCCL_CHECK(ncclGroupEnd());
    return;
  }
  const size_t nvec = count / 4;
  const size_t per_rank = algo == Algo::kOneShot ? nvec : course::ceil_div<size_t>(nvec, g.n);
  const int blocks = static_cast<int>(std::max<size_t>(
      1, std::min<size_t>({course::ceil_div<size_t>(per_rank, kThreads), static_cast<size_t>(g.sms),
                           static_cast<size_t>(kMaxBlocks)})));
  ++g.epoch;  // every barrier value of this call is larger than any of the last call's
  switch (g.n) {
    case 1: launch_ours<1>(g, algo, count, blocks); break;  // --gpus 1: every barrier is with itself
    case 2: launch_ours<2>(g, algo, count, blocks); break;
    case 3: launch_ours<3>(g, algo, count, blocks); break;
    case 4: launch_ours<4>(g, algo, count, blocks); break;
    case 5: launch_ours<5>(g, algo, count, blocks); break;
    case 6: launch_ours<6>(g, algo, count, blocks); break;
    case 7: launch_ours<7>(g, algo, count, blocks); break;
    default: launch_ours<8>(g, algo, count, blocks); break;
  }
}
// --8<-- [end:launch]

static void sync_all(const Group& g) {
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaStreamSynchronize(g.stream[r]));
  }
}

// A barrier that timed out leaves a nonzero status on its rank: the results are wrong, and this says why.
static bool no_timeouts(const Group& g, const char* check_name) {
  bool ok = true;
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    int status = 0;
    CUDA_CHECK(cudaMemcpy(&status, g.peers.status[r], sizeof(int), cudaMemcpyDeviceToHost));
    if (status != 0) {
      std::printf("rank %d waited more than %llu s for rank %d at a barrier\n", r, kTimeoutNs / 1000000000ull,
                  status - 1);
      ok = false;
    }
  }
  return course::check_true(check_name, ok, static_cast<size_t>(g.n));
}

static const char* algo_name(Algo a) {
  return a == Algo::kOneShot ? "one-shot" : a == Algo::kTwoShot ? "two-shot" : "NCCL";
}

static void fill_inputs(Group& g, size_t count, uint64_t seed) {
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    fill_input<<<256, 256, 0, g.stream[r]>>>(const_cast<float*>(g.peers.in[r]), count, seed, r);
    CUDA_CHECK_LAUNCH();
  }
}

// --8<-- [start:check]
// Three calls in a row for each algorithm with no host synchronisation between them: before each, the
// output is poisoned (NaN) and the inputs are rewritten with fresh values, on each GPU's stream right
// after its previous call, so a rank that left a call while a peer still read its buffers would corrupt
// that peer's sums. Each call's output is copied aside; every rank's result must equal the exact integer
// sum bit for bit.
static bool check(Group& g, size_t count, uint64_t seed, bool with_nccl) {
  constexpr int kCalls = 3;
  std::vector<float*> saved(static_cast<size_t>(g.n) * kCalls);
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    for (int call = 0; call < kCalls; ++call) saved[r * kCalls + call] = course::device_alloc<float>(count);
  }
  std::vector<double> want(count);
  std::vector<float> got(count);
  bool ok = true;
  std::vector<Algo> algos = {Algo::kOneShot, Algo::kTwoShot};
  if (with_nccl) algos.push_back(Algo::kNccl);
  for (Algo algo : algos) {
    for (int call = 0; call < kCalls; ++call) {
      for (int r = 0; r < g.n; ++r) {
        CUDA_CHECK(cudaSetDevice(r));
        float* out = algo == Algo::kNccl ? g.nccl_out[r] : g.peers.out[r];
        CUDA_CHECK(cudaMemsetAsync(out, 0xFF, count * sizeof(float), g.stream[r]));  // NaN: a skipped element fails
      }
      fill_inputs(g, count, seed * 16 + static_cast<uint64_t>(call));
      allreduce(g, algo, count);
      for (int r = 0; r < g.n; ++r) {
        CUDA_CHECK(cudaSetDevice(r));
        const float* out = algo == Algo::kNccl ? g.nccl_out[r] : g.peers.out[r];
        CUDA_CHECK(cudaMemcpyAsync(saved[r * kCalls + call], out, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                   g.stream[r]));
      }
    }
    sync_all(g);
    for (int call = 0; call < kCalls; ++call) {
      const uint64_t s = seed * 16 + static_cast<uint64_t>(call);
      for (size_t i = 0; i < count; ++i) {
        want[i] = 0.0;
        for (int r = 0; r < g.n; ++r) want[i] += input_value(s, r, i);
      }
      for (int r = 0; r < g.n; ++r) {
        CUDA_CHECK(cudaSetDevice(r));
        CUDA_CHECK(cudaMemcpy(got.data(), saved[r * kCalls + call], count * sizeof(float), cudaMemcpyDeviceToHost));
        const std::string name = std::string(algo_name(algo)) + "_call" + std::to_string(call) + "_rank" +
                                 std::to_string(r) + "_of_" + std::to_string(g.n);
        ok &= course::check_close(name.c_str(), got.data(), want.data(), count, 0.0, 0.0);
      }
    }
  }
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    for (int call = 0; call < kCalls; ++call) CUDA_CHECK(cudaFree(saved[r * kCalls + call]));
  }
  const std::string name = "barriers_completed_of_" + std::to_string(g.n);
  return no_timeouts(g, name.c_str()) && ok;
}
// --8<-- [end:check]

__global__ void hold_kernel(unsigned long long ns) {
  const unsigned long long start = now_ns();
  while (now_ns() - start < ns) {
  }
}

static std::string size_label(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

// --8<-- [start:bench]
// Milliseconds per all-reduce: on every GPU, a 5 ms GPU-side wait (the host queues all the calls of a
// repeat meanwhile, so launch costs stay out), then `batch` calls between CUDA events; per repeat the
// slowest GPU's time counts, and the median over repeats is returned. busbw = S / t * 2 (n - 1) / n.
static double time_allreduce(Group& g, Algo algo, size_t count, int batch, int repeats) {
  for (int w = 0; w < 3; ++w) allreduce(g, algo, count);
  sync_all(g);
  std::vector<cudaEvent_t> start(g.n), stop(g.n);
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaEventCreate(&start[r]));
    CUDA_CHECK(cudaEventCreate(&stop[r]));
  }
  std::vector<double> times;
  for (int rep = 0; rep < repeats; ++rep) {
    for (int r = 0; r < g.n; ++r) {
      CUDA_CHECK(cudaSetDevice(r));
      hold_kernel<<<1, 1, 0, g.stream[r]>>>(5ull * 1000 * 1000);
      CUDA_CHECK_LAUNCH();
      CUDA_CHECK(cudaEventRecord(start[r], g.stream[r]));
    }
    for (int b = 0; b < batch; ++b) allreduce(g, algo, count);
    for (int r = 0; r < g.n; ++r) {
      CUDA_CHECK(cudaSetDevice(r));
      CUDA_CHECK(cudaEventRecord(stop[r], g.stream[r]));
    }
    sync_all(g);
    double slowest = 0.0;
    for (int r = 0; r < g.n; ++r) {
      float ms = 0.0f;
      CUDA_CHECK(cudaEventElapsedTime(&ms, start[r], stop[r]));
      slowest = std::max(slowest, static_cast<double>(ms) / batch);
    }
    times.push_back(slowest);
  }
  for (int r = 0; r < g.n; ++r) {
    CUDA_CHECK(cudaSetDevice(r));
    CUDA_CHECK(cudaEventDestroy(start[r]));
    CUDA_CHECK(cudaEventDestroy(stop[r]));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

static void bench(Group& g, size_t max_bytes) {
  fill_inputs(g, g.capacity, 99);
  sync_all(g);
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    const bool big = bytes >= (size_t(64) << 20);
    for (Algo algo : {Algo::kOneShot, Algo::kTwoShot, Algo::kNccl}) {
      const double ms = time_allreduce(g, algo, count, big ? 5 : 20, big ? 7 : 15);
      const double algbw = static_cast<double>(bytes) / (ms * 1e6);
      const double busbw = algbw * 2.0 * (g.n - 1) / g.n;
      const std::string c = "all-reduce, " + std::to_string(g.n) + " GPUs, " + size_label(bytes);
      const std::string impl = algo == Algo::kNccl ? "NCCL, fp32" : std::string(algo_name(algo)) + " (ours), fp32";
      std::printf("BENCH {\"case\": \"%s\", \"impl\": \"%s\", \"time_ms\": %.6g, \"bytes\": %zu, \"flops\": %zu, "
                  "\"peer\": %s, \"gpus\": %d, \"size_bytes\": %zu, \"algbw_gbps\": %.4g, \"busbw_gbps\": %.4g, "
                  "\"busbw_gbps_%dgpus\": %.4g}\n",
                  c.c_str(), impl.c_str(), ms, bytes, size_t(0), algo == Algo::kNccl ? "true" : "false",
                  g.n, bytes, algbw, busbw, g.n, busbw);
      std::fflush(stdout);
    }
  }
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const long long count = args.get_int("--count", 1000003, 1, 1LL << 28);
  const long long want_gpus = args.get_int("--gpus", 0, 0, kMaxRanks);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026));
  const long long max_mib = args.get_int("--max-mib", 1024, 1, 1024);
  const bool no_nccl = args.has("--no-nccl");  // our kernels only (the sanitizer run: NCCL trips its tools)
  const bool run_bench = args.has("--bench");
  args.finish();
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink multicast stays off on the course's machines
  int available = 0;
  CUDA_CHECK(cudaGetDeviceCount(&available));
  if (want_gpus > 0) available = std::min<int>(available, static_cast<int>(want_gpus));
  available = std::min(available, kMaxRanks);
  // --gpus 1 runs a one-rank all-reduce: every barrier is with itself, so no kernel waits for another
  // GPU's. It proves nothing about peer-to-peer, but it runs under compute-sanitizer, which may hold a
  // kernel launch until the kernel ends (kernels that wait for each other across GPUs cannot run so).
  if (available < 2 && !(want_gpus == 1 && available == 1)) {
    std::printf("WAIVED needs 2 GPUs of one machine (%d usable)\n", available);
    return course::kExitWaived;
  }
  if (!enable_peer_access(available)) return course::kExitWaived;
  bool ok = true;
  std::vector<int> sizes;  // 2, 4, 8 GPUs up to what there is, and the total if it is not one of them
  for (int n = 2; n <= available; n *= 2) sizes.push_back(n);
  if (sizes.empty() || sizes.back() != available) sizes.push_back(available);
  for (int n : sizes) {
    const size_t capacity = run_bench ? std::max<size_t>(static_cast<size_t>(count), (size_t(max_mib) << 20) / 4)
                                      : static_cast<size_t>(count);
    Group g = make_group(n, capacity, !no_nccl || run_bench);
    std::printf("%d GPUs, %d SMs each, blocks of %d threads\n", n, g.sms, kThreads);
    const bool passed = check(g, static_cast<size_t>(count), seed, !no_nccl);
    ok &= passed;
    if (passed && run_bench) bench(g, size_t(max_mib) << 20);
    if (passed && run_bench) ok &= no_timeouts(g, ("bench_barriers_completed_of_" + std::to_string(n)).c_str());
    destroy_group(g);
  }
  return ok ? 0 : course::kExitFail;
}
