// flash_fwd.cu: fused attention forward, FlashAttention-2 style, in plain FP32 (v1) and on tensor
// cores (v2, v3), checked against a float64 reference and timed on the chapter's benchmark.
//
// Taught in docs/attention/flash-forward.md. The kernels are in flash_fwd.cuh (flash_bwd.cu runs
// them too); this file checks and times them:
//   v1  plain FP32 arithmetic, one warp per query row (the algorithm)
//   v2  mma.sync m16n8k16 (bf16 in, fp32 accumulate), 4 warps = 64 query rows per block
//   v3  the same kernel with 8 warps = 128 query rows per block (each K/V tile serves twice the rows)
// Build: nvcc -std=c++17 -O3 -arch=native -o build/attention/flash_fwd kernels/attention/flash_fwd.cu
// Run:   ./build/attention/flash_fwd --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
//        ./build/attention/flash_fwd --bench     (b4 h16 s4096 d128, causal and not; memory at growing seq)
// Needs compute capability 8.0 (bf16 mma.sync, ldmatrix, cp.async).
//
// course: gpu
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 1 --heads 3 --seq 333 --dim 64 --causal
// course: run --batch 2 --heads 2 --seq 1000 --dim 128
// course: run --batch 4 --heads 1 --seq 777 --dim 128 --causal --padding
// course: bench --bench
#include <string>

#include "attention_common.cuh"
#include "flash_fwd.cuh"

double atol_for(int version) { return version == 1 ? attn::kAtolFp32P : attn::kAtolBf16P; }

const char* impl_name(int version) {
  switch (version) {
    case 1: return "flash v1 FP32 (bf16 in, fp32 math)";
    case 2: return "flash v2 mma.sync 64-row blocks (bf16, fp32 acc)";
    default: return "flash v3 mma.sync 128-row blocks (bf16, fp32 acc)";
  }
}

struct DeviceBuffers {
  flash::bf16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float* lse = nullptr;
  int* key_len = nullptr;
  double bytes = 0;  // everything allocated here: the fused kernel's whole footprint
};

DeviceBuffers upload(const attn::Shape& s, const attn::Inputs& in) {
  DeviceBuffers d;
  const size_t n = s.elements() * sizeof(flash::bf16);
  CUDA_CHECK(cudaMalloc(&d.q, n));
  CUDA_CHECK(cudaMalloc(&d.k, n));
  CUDA_CHECK(cudaMalloc(&d.v, n));
  CUDA_CHECK(cudaMalloc(&d.o, n));
  CUDA_CHECK(cudaMalloc(&d.lse, s.rows() * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d.key_len, s.batch * sizeof(int)));
  d.bytes = 4.0 * n + s.rows() * sizeof(float) + s.batch * sizeof(int);
  CUDA_CHECK(cudaMemcpy(d.q, in.qb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.k, in.kb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.v, in.vb.data(), n, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.key_len, s.key_len.data(), s.batch * sizeof(int), cudaMemcpyHostToDevice));
  return d;
}

void release(DeviceBuffers& d) {
  for (void* ptr : {static_cast<void*>(d.q), static_cast<void*>(d.k), static_cast<void*>(d.v),
                    static_cast<void*>(d.o), static_cast<void*>(d.lse), static_cast<void*>(d.key_len)})
    CUDA_CHECK(cudaFree(ptr));
}

flash::Params params_for(const attn::Shape& s, const DeviceBuffers& d) {
  return flash::Params{d.q, d.k, d.v, d.o, d.lse, d.key_len, s.heads, s.seq,
                       static_cast<float>(s.scale()) * flash::kLog2e, s.causal};
}

// Poison, run, copy back, check the chosen rows against the float64 reference.
bool run_and_check(int version, const attn::Shape& s, const attn::Inputs& in, const DeviceBuffers& d,
                   const std::vector<long long>& rows) {
  course::poison(d.o, s.elements() * sizeof(flash::bf16));
  course::poison(d.lse, s.rows() * sizeof(float));
  flash::launch(version, params_for(s, d), s.batch, s.dim);
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<flash::bf16> out(s.elements());
  std::vector<float> lse(s.rows());
  CUDA_CHECK(cudaMemcpy(out.data(), d.o, out.size() * sizeof(flash::bf16), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(lse.data(), d.lse, lse.size() * sizeof(float), cudaMemcpyDeviceToHost));
  const std::string name = "v" + std::to_string(version) + " " + attn::case_name(s) +
                           (s.key_len[s.batch - 1] < s.seq || s.key_len[0] < s.seq ? " padded" : "");
  return attn::check_forward(name.c_str(), s, in, out, lse, rows, attn::kRtol, atol_for(version));
}

// Check, then time, one shape; `versions` lists which kernels.
bool check_and_time(const attn::Shape& s, const std::vector<int>& versions, uint64_t seed, int repeats) {
  const attn::Inputs in = attn::make_inputs(s, seed);
  DeviceBuffers d = upload(s, in);
  const std::vector<long long> rows = attn::rows_to_check(s);
  bool ok = true;
  for (int version : versions) {
    ok = run_and_check(version, s, in, d, rows) && ok;
    const flash::Params p = params_for(s, d);
    const double ms = course::time_kernel_ms([&] { flash::launch(version, p, s.batch, s.dim); }, 2, repeats);
    // Bytes the operation must move: Q, K, V read once, O written once, the logsumexp written.
    const double bytes = 4.0 * s.elements() * sizeof(flash::bf16) + s.rows() * sizeof(float);
    attn::print_bench_row(attn::case_name(s).c_str(), impl_name(version), ms, bytes, s.forward_flops(), s.seq, d.bytes);
  }
  release(d);
  return ok;
}

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  const int batch = static_cast<int>(args.get_int("--batch", 2, 1, 64));
  const int heads = static_cast<int>(args.get_int("--heads", 3, 1, 64));
  const int seq = static_cast<int>(args.get_int("--seq", 333, 1, 1 << 17));
  const int dim = static_cast<int>(args.get_int("--dim", 128, 64, 128));
  const bool causal = args.has("--causal");
  const bool padding = args.has("--padding");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2024, 0));
  const bool bench = args.has("--bench");
  args.finish();
  if (dim != 64 && dim != 128) {
    std::fprintf(stderr, "error: --dim must be 64 or 128, got %d\n", dim);
    return course::kExitFail;
  }
  course::require_compute_capability(8, 0, "bf16 mma.sync, ldmatrix and cp.async");

  bool ok = true;
  if (!bench) {
    attn::Shape s{batch, heads, seq, dim, causal, attn::key_lengths(batch, seq, padding)};
    const attn::Inputs in = attn::make_inputs(s, seed);
    DeviceBuffers d = upload(s, in);
    const std::vector<long long> rows = attn::rows_to_check(s);
    for (int version : {1, 2, 3}) ok = run_and_check(version, s, in, d, rows) && ok;
    release(d);
    return ok ? 0 : course::kExitFail;
  }
  // --8<-- [start:bench]
  // The chapter's benchmark, the same cases as sdpa_torch.py: bf16, batch 4 x 16 heads, sequence
  // 4096, head dimension 128, causal and not. Each timed kernel is first checked on sampled rows.
  for (bool is_causal : {false, true}) {
    attn::Shape s{4, 16, 4096, 128, is_causal, attn::key_lengths(4, 4096, false)};
    ok = check_and_time(s, {1, 2, 3}, seed, 20) && ok;
  }
  // Memory at growing sequence lengths (the fused kernels allocate O(seq), no score matrix).
  for (int n : {1024, 2048, 8192, 16384, 32768}) {
    attn::Shape s{4, 16, n, 128, false, attn::key_lengths(4, n, false)};
    ok = check_and_time(s, {2}, seed, n > 8192 ? 5 : 20) && ok;
  }
  // --8<-- [end:bench]
  return ok ? 0 : course::kExitFail;
}
