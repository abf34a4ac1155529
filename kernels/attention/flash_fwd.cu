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
//        ./build/attention/flash_fwd --batch 4 --heads 16 --seq 4096 --plant zeros-small   (or tile: v2's
//        output corrupted after the run; passes only if the check rejects it)
// Needs compute capability 8.0 (bf16 mma.sync, ldmatrix, cp.async).
//
// course: gpu
// course: run --batch 3 --heads 2 --seq 127 --dim 64 --padding
// course: run --batch 3 --heads 2 --seq 333 --dim 128 --causal --padding
// course: run --batch 2 --heads 3 --seq 1 --dim 128 --causal
// course: run --batch 1 --heads 3 --seq 333 --dim 64 --causal
// course: run --batch 2 --heads 2 --seq 1000 --dim 128
// course: run --batch 4 --heads 1 --seq 777 --dim 128 --causal --padding
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --plant zeros-small
// course: run --batch 4 --heads 16 --seq 4096 --dim 128 --causal --plant tile
// course: bench --bench
// course: invariant faster causal non-causal max-ratio=0.8
// course: invariant grows seq "flash v2*"
#include <string>

#include "../common/check.cuh"
#include "../common/planted.cuh"
#include "attention_common.cuh"
#include "flash_fwd.cuh"

const char* impl_name(int version) {
  switch (version) {
    case 1: return "flash v1 FP32 (bf16 in, fp32 math)";
    case 2: return "flash v2 mma.sync 64-row blocks (bf16, fp32 acc)";
    default: return "flash v3 mma.sync 128-row blocks (bf16, fp32 acc)";
  }
}

flash::Params params_for(const attn::Shape& s, const attn::ForwardBuffers& d) {
  return flash::Params{d.in.q, d.in.k, d.in.v, d.o, d.lse, d.in.key_len, s.heads, s.seq,
                       static_cast<float>(s.scale()) * flash::kLog2e, s.causal};
}

// Poison, run, copy back, check every chosen row against the float64 reference (v1 keeps P in fp32,
// v2 and v3 round it to bf16: each is held to the rounded reference of its own precision).
bool run_and_check(int version, const attn::Shape& s, const attn::ForwardReference& ref,
                   const attn::ForwardBuffers& d, attn::Plant plant = attn::Plant::kNone) {
  const std::string name = "v" + std::to_string(version) + " " + attn::case_name(s) + attn::padded_suffix(s);
  return attn::run_and_check_forward(name, s, ref, d, version != 1, plant,
                                     [&] { flash::launch(version, params_for(s, d), s.batch, s.dim); });
}

// Check, then (repeats > 0) time, one shape; `versions` lists which kernels. The reference is
// computed once, on every CPU core, for all of them.
bool check_and_time(const attn::Shape& s, const std::vector<int>& versions, uint64_t seed, int repeats,
                    double check_budget = attn::kCheckBudget, attn::Plant plant = attn::Plant::kNone) {
  const attn::Inputs in = attn::make_inputs(s, seed);
  const attn::ForwardBuffers d = attn::upload_and_allocate(s, in);
  const attn::ForwardReference ref = attn::forward_reference(s, in, attn::rows_to_check(s, check_budget));
  bool ok = true;
  for (int version : versions) {
    ok = run_and_check(version, s, ref, d, plant) && ok;
    if (repeats == 0) continue;
    const flash::Params p = params_for(s, d);
    attn::bench_forward(s, impl_name(version), d.bytes, repeats, [&] { flash::launch(version, p, s.batch, s.dim); });
  }
  d.release();
  return ok;
}

int main(int argc, char** argv) {
  const attn::Options opt = attn::parse_options(argc, argv, 1 << 17);
  course::require_compute_capability(8, 0, "bf16 mma.sync, ldmatrix and cp.async");

  if (opt.plant != attn::Plant::kNone)  // v2's output, corrupted after the run: must be rejected
    return check_and_time(opt.shape, {2}, opt.seed, 0, attn::kCheckBudget, opt.plant) ? 0 : course::kExitFail;
  if (!opt.bench) return check_and_time(opt.shape, {1, 2, 3}, opt.seed, 0) ? 0 : course::kExitFail;
  bool ok = true;
  // --8<-- [start:bench]
  // The chapter's benchmark, the same cases as sdpa_torch.py: bf16, batch 4 x 16 heads, sequence
  // 4096, head dimension 128, causal and not. Each timed kernel is first checked on every row.
  for (bool is_causal : {false, true})
    ok = check_and_time(attn::bench_shape(is_causal), {1, 2, 3}, opt.seed, 20) && ok;
  // Memory at growing sequence lengths (the fused kernels allocate O(seq), no score matrix); the
  // longer sequences are checked on a sample of 64-row tiles.
  for (int n : {1024, 2048, 8192, 16384, 32768})
    ok = check_and_time(attn::bench_shape(false, n), {2}, opt.seed, n > 8192 ? 5 : 20, attn::kSweepBudget) && ok;
  // --8<-- [end:bench]
  return ok ? 0 : course::kExitFail;
}
