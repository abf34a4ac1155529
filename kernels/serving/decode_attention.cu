// decode_attention.cu: attention of one new query token per sequence against a long bf16 KV cache,
// with grouped-query attention (several query heads share one KV head) and split-KV (flash-decoding):
//   decode_split  one block per (chunk of the cache, KV head, sequence) reads its chunk of K and V once
//                 for every query head of the group and writes a partial result: the running maximum,
//                 the sum of exponentials and the unnormalised output, in fp32;
//   decode_merge  one block per (sequence, query head) merges the chunks' partials with the
//                 log-sum-exp rule and writes the output in bf16.
// Both kernels live in decode_common.cuh, shared with paged_decode_attention.cu; this file checks and
// times them on a contiguous cache.
//
// Taught in docs/serving/decode-attention.md; its peer is decode_attention_sdpa.py (every PyTorch SDPA
// backend at the same shapes). Layouts: q and the output [batch][heads][dim], the caches
// [batch][kv_heads][capacity][dim], lengths[batch] in [0, capacity]; query head h reads KV head
// h / (heads / kv_heads), as PyTorch's enable_gqa does. A sequence with an empty cache gets zeros.
// Build: python -m course.toolchain build-all 1 kernels/serving/decode_attention.cu
// Run:   ./build/serving/decode_attention --batch 5 --context 4999 --cache 5003   (checks against float64)
//        ./build/serving/decode_attention --bench          (also contexts 1k to 128k, batch 1 to 64)
//
// course: gpu
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 4999 --cache 5003 --seed 31
// course: run --batch 4 --heads 12 --kv-heads 12 --dim 128 --context 777 --seed 32
// course: run --batch 4 --heads 16 --kv-heads 2 --dim 64 --context 70001 --seed 33
// course: run --batch 1 --heads 32 --kv-heads 8 --dim 64 --context 1 --seed 34
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --seed 35 --plant tile
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --seed 36 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "decode_common.cuh"  // the problem, reference, split and merge kernels, shared with the paged cache

// Checks the kernels on one problem: random q, K, V rounded to bf16, NaN in every cache slot past a
// sequence's length (a read past it poisons the output), the output poisoned; split as planned and
// in one chunk; each against float64 with the chapter's data-scaled tolerance.
static bool check(const decode::Problem& p, uint64_t seed, attn::Plant plant) {
  decode::HostInputs in = decode::random_host_inputs(p.q_elements(), p.cache_elements(), seed);
  const __nv_bfloat16 nan = __float2bfloat16(NAN);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.kv_heads; ++h)
      for (size_t j = p.lengths[b]; j < static_cast<size_t>(p.capacity); ++j)
        for (int c = 0; c < p.dim; ++c) {
          const size_t e = ((static_cast<size_t>(b) * p.kv_heads + h) * p.capacity + j) * p.dim + c;
          in.kb[e] = in.vb[e] = nan;
        }
  const std::vector<double> exact =
      decode::reference(p, in.q.data(), in.k.data(), in.v.data(), decode::contiguous_rows(p));
  const std::vector<double> rounded = decode::rounded_output(exact);

  decode::Buffers d;
  d.q = course::to_device(in.qb), d.k = course::to_device(in.kb), d.v = course::to_device(in.vb);
  d.lengths = course::to_device(p.lengths);
  d.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  bool ok = true;
  for (const int forced : {0, 1}) {
    const decode::Plan pl = decode::plan(p, decode::sm_count(), forced);
    decode::allocate_partials(p, pl, d);
    course::poison(d.out, p.q_elements() * sizeof(__nv_bfloat16));
    decode::launch(p, pl, d);
    char name[160];
    std::snprintf(name, sizeof(name), "decode b%d hq%d hkv%d d%d ctx%d cache%d splits%d", p.batch, p.heads,
                  p.kv_heads, p.dim, p.lengths[0], p.capacity, pl.splits);
    ok = decode::report_output(name, course::to_host(d.out, p.q_elements()), exact, rounded, p.dim, plant) && ok;
    if (plant != attn::Plant::kNone) break;
  }
  d.release();
  // The guard itself: a length past the cache is refused (quietly here; main prints the error).
  decode::Problem longer = p;
  longer.lengths[0] = p.capacity + 1;
  ok = course::check_true("rejects_context_longer_than_cache", !decode::lengths_fit(longer, true), 1) && ok;
  return ok;
}

// --8<-- [start:bench]
// The benchmark: Llama-3.2-1B's attention (32 query heads, 8 KV heads, dim 64), every sequence at the
// same context; bytes are the K and V cache read (q and the output are under 0.1% of it). The reference
// is a device-to-device copy moving the same bytes (half read, half written).
static void bench_case(int batch, int context, uint64_t seed) {
  decode::Problem p{batch, 32, 8, 64, context, std::vector<int>(batch, context)};
  const double cache_bytes = 2.0 * p.cache_elements() * sizeof(__nv_bfloat16);
  decode::Buffers d = decode::random_device_buffers(p, seed);
  const decode::Plan pl = decode::plan(p, decode::sm_count());
  decode::allocate_partials(p, pl, d);
  const float ms = course::time_kernel_ms([&] { decode::launch(p, pl, d); });
  const float copy_ms = decode::time_copy_ms(d.v, d.k, p.cache_elements());
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "b%d ctx%d", batch, context);
  const double flops = 4.0 * p.batch * p.heads * static_cast<double>(context) * p.dim;
  course::print_bench(case_name, "split-KV decode (bf16)", ms, cache_bytes, flops, false,
                      {{"batch", batch}, {"context", context}, {"chunks", pl.splits}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, cache_bytes, 0.0, true,
                      {{"batch", batch}, {"context", context}});
  d.release();
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  decode::Options o = decode::read_options(args);
  const int cache = static_cast<int>(args.get_int("--cache", 0, 0, 1 << 17));  // 0: as long as the context
  args.finish();
  attn::Plant fault = attn::Plant::kNone;
  if (!course::parse_plant(o.plant, {attn::Plant::kZerosSmall, attn::Plant::kTile}, fault))
    return course::kExitFail;
  decode::Problem& p = o.p;
  p.capacity = std::max(1, cache > 0 ? cache : o.context);
  p.lengths = decode::edge_lengths(p.batch, o.context);
  if (!decode::supported(p) || !decode::lengths_fit(p)) return course::kExitFail;

  const bool ok = check(p, o.seed, fault);
  if (ok && o.bench && fault == attn::Plant::kNone)
    for (const int batch : {1, 8, 64})
      for (const int ctx : {1024, 8192, 32768, 131072}) bench_case(batch, ctx, o.seed);
  return ok ? 0 : course::kExitFail;
}
