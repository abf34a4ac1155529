// paged_decode_attention.cu: decode attention (decode_attention.cu's split-KV kernels, from
// decode_common.cuh) reading a paged KV cache. The cache is a pool of pages, K and V each
// [num_pages][kv_heads][page_size][dim] bf16; a block table int32 [batch][max_pages] maps page i of a
// sequence (its tokens i * page_size to (i + 1) * page_size - 1) to a physical page of the pool.
//   PagedCache  the split kernel's cache policy: a block loads the physical pages of a tile of its chunk
//               into shared memory once, then finds each key's row there.
// One page of one KV head is a contiguous page_size x dim tile, so a lane group's 16-byte loads stay
// coalesced exactly as in the contiguous cache; only the tile's base address changes from page to page.
//
// Taught in docs/serving/paged-kv-cache.md; its peer is the contiguous kernel on the same logical cache,
// timed in the same process. A sequence with an empty cache gets zeros.
// Build: python -m course.toolchain build-all 1 kernels/serving/paged_decode_attention.cu
// Run:   ./build/serving/paged_decode_attention --batch 5 --context 4999 --page-size 16   (checks)
//        ./build/serving/paged_decode_attention --bench   (also contexts 4k and 32k, pages of 16 and 64)
//
// course: gpu
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 4999 --page-size 16 --seed 41
// course: run --batch 4 --heads 12 --kv-heads 12 --dim 128 --context 777 --page-size 32 --seed 42
// course: run --batch 4 --heads 16 --kv-heads 2 --dim 64 --context 70001 --page-size 64 --seed 43
// course: run --batch 6 --heads 32 --kv-heads 4 --dim 128 --context 3001 --page-size 128 --seed 44
// course: run --batch 1 --heads 32 --kv-heads 8 --dim 64 --context 1 --page-size 16 --seed 45
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --page-size 16 --seed 46 --plant tile
// course: run --batch 5 --heads 32 --kv-heads 8 --dim 64 --context 1999 --page-size 64 --seed 47 --plant zeros-small
// course: bench --bench
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"
#include "decode_common.cuh"

namespace paged {

// --8<-- [start:paged_cache]
// Token key of (b, kv_head) lives in physical page table[b][key / page_size], row key % page_size of
// that page's kv_head tile. A block reads its chunk in tiles of kTablePages pages: it loads the tile's
// page numbers into shared memory once (one global read per page, not per key), then every lane finds
// its keys' rows there. Chunks and tiles start on page boundaries (the plan makes chunks whole pages).
struct PagedCache {
  const int* block_table;  // [batch][max_pages]
  int max_pages, page_shift;  // page_size = 1 << page_shift
  static constexpr int kTablePages = 64;  // a tile: 1,024 to 8,192 keys, whole steps of the kernel
  static constexpr int kTableInts = kTablePages;
  __device__ int capacity() const { return max_pages << page_shift; }
  __device__ int tile_keys(int) const { return kTablePages << page_shift; }
  __device__ void load_tile(int* table, int b, int first_key, int end_key) const {
    __syncthreads();  // every lane is done with the previous tile's pages
    const int first_page = first_key >> page_shift;
    const int pages = (end_key - first_key + (1 << page_shift) - 1) >> page_shift;
    for (int t = threadIdx.x; t < pages; t += blockDim.x)
      table[t] = block_table[static_cast<size_t>(b) * max_pages + first_page + t];
    __syncthreads();
  }
  __device__ size_t row(const int* table, int, int kv_head, int kv_heads, int key, int tile_first) const {
    const int local = key - tile_first;  // tile_first is a page boundary
    const size_t tile_row = (static_cast<size_t>(table[local >> page_shift]) * kv_heads + kv_head) << page_shift;
    return tile_row + (local & ((1 << page_shift) - 1));
  }
};
// --8<-- [end:paged_cache]

// A paged problem: the logical problem (capacity = max_pages * page_size slots per sequence), the
// pool's size and the block table.
struct Pool {
  int page_size = 16, max_pages = 1, num_pages = 1;
  std::vector<int> table;  // [batch][max_pages]
  int page_shift() const { return __builtin_ctz(static_cast<unsigned>(page_size)); }
  size_t elements(const decode::Problem& p) const {
    return static_cast<size_t>(num_pages) * p.kv_heads * page_size * p.dim;
  }
  int pages_of(int length) const { return course::ceil_div(length, page_size); }
};

inline bool page_size_supported(int page_size) {
  if (page_size == 16 || page_size == 32 || page_size == 64 || page_size == 128) return true;
  std::fprintf(stderr, "error: --page-size must be 16, 32, 64 or 128 tokens, got %d\n", page_size);
  return false;
}

// --8<-- [start:validate]
// Refused before any launch: a sequence longer than its block table maps, or a page it uses that is
// not in the pool (a kernel would read another allocation's memory). Entries past a sequence's last
// page are never read and may hold anything.
inline bool table_valid(const decode::Problem& p, const Pool& pool, bool quiet = false) {
  for (int b = 0; b < p.batch; ++b) {
    if (p.lengths[b] < 0 || p.lengths[b] > pool.max_pages * pool.page_size) {
      if (!quiet)
        std::fprintf(stderr, "error: sequence %d has %d tokens but its block table maps %d pages of %d tokens\n",
                     b, p.lengths[b], pool.max_pages, pool.page_size);
      return false;
    }
    for (int i = 0; i < pool.pages_of(p.lengths[b]); ++i) {
      const int page = pool.table[static_cast<size_t>(b) * pool.max_pages + i];
      if (page < 0 || page >= pool.num_pages) {
        if (!quiet)
          std::fprintf(stderr, "error: block table entry [%d][%d] is page %d, outside the pool of %d pages\n", b, i,
                       page, pool.num_pages);
        return false;
      }
    }
  }
  return true;
}
// --8<-- [end:validate]

// The row of the pool holding token j of (b, kv_head): the host's walk of the block table, for the
// float64 reference.
inline auto pool_rows(const decode::Problem& p, const Pool& pool) {
  return [&p, &pool](int b, int kv_head, int j) {
    const size_t page = pool.table[static_cast<size_t>(b) * pool.max_pages + j / pool.page_size];
    return (page * p.kv_heads + kv_head) * pool.page_size + j % pool.page_size;
  };
}

// A pool whose pages are dealt to the sequences in random order (pages of different sequences
// interleaved) with `spare` pages left over; unused table entries point at a spare page.
inline Pool random_pool(const decode::Problem& p, int page_size, int max_pages, int spare, uint64_t seed) {
  Pool pool;
  pool.page_size = page_size, pool.max_pages = max_pages;
  int used = 0;
  for (const int len : p.lengths) used += pool.pages_of(len);
  pool.num_pages = used + spare;
  std::vector<int> order(pool.num_pages);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  pool.table.assign(static_cast<size_t>(p.batch) * max_pages, order.back());  // order.back(): a spare page
  int next = 0;
  for (int b = 0; b < p.batch; ++b)  // a sequence longer than its table gets what fits (table_valid refuses it)
    for (int i = 0; i < std::min(pool.pages_of(p.lengths[b]), max_pages); ++i)
      pool.table[static_cast<size_t>(b) * max_pages + i] = order[next++];
  return pool;
}

}  // namespace paged

// Checks the paged kernels on one problem: a randomly dealt pool with spare pages, random q, K, V
// rounded to bf16, NaN in every spare page and in every slot past a sequence's length in its last page
// (reading a wrong page or past the end poisons the output), the output poisoned; split as planned and
// in one chunk; each against the float64 reference walking the block table, with the chapter's
// data-scaled tolerance, and bit for bit against the contiguous kernel on the same logical cache.
static bool check(const decode::Problem& p, const paged::Pool& pool, uint64_t seed, attn::Plant plant) {
  const size_t pool_elements = pool.elements(p);
  decode::HostInputs in = decode::random_host_inputs(p.q_elements(), pool_elements, seed);

  // Poison every row no sequence owns; the logical contiguous cache copies the owned rows.
  const auto row_of = paged::pool_rows(p, pool);
  const __nv_bfloat16 nan = __float2bfloat16(NAN);
  std::vector<char> owned(pool_elements / p.dim, 0);
  std::vector<__nv_bfloat16> kc(p.cache_elements(), nan), vc(p.cache_elements(), nan);
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.kv_heads; ++h)
      for (int j = 0; j < p.lengths[b]; ++j) {
        const size_t from = row_of(b, h, j), to = (static_cast<size_t>(b) * p.kv_heads + h) * p.capacity + j;
        owned[from] = 1;
        std::copy_n(in.kb.begin() + from * p.dim, p.dim, kc.begin() + to * p.dim);
        std::copy_n(in.vb.begin() + from * p.dim, p.dim, vc.begin() + to * p.dim);
      }
  for (size_t r = 0; r < owned.size(); ++r)
    if (!owned[r])
      std::fill_n(in.kb.begin() + r * p.dim, p.dim, nan), std::fill_n(in.vb.begin() + r * p.dim, p.dim, nan);

  const std::vector<double> exact = decode::reference(p, in.q.data(), in.k.data(), in.v.data(), row_of);
  const std::vector<double> rounded = decode::rounded_output(exact);

  decode::Buffers d, contiguous;
  d.q = course::to_device(in.qb), d.k = course::to_device(in.kb), d.v = course::to_device(in.vb);
  d.lengths = course::to_device(p.lengths);
  d.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  int* table = course::to_device(pool.table);
  contiguous.k = course::to_device(kc), contiguous.v = course::to_device(vc);
  contiguous.q = d.q, contiguous.lengths = d.lengths;
  contiguous.out = course::device_alloc<__nv_bfloat16>(p.q_elements());
  const paged::PagedCache cache{table, pool.max_pages, pool.page_shift()};
  const int chunk_multiple = std::max(decode::kChunkMultiple, pool.page_size);  // chunks of whole pages

  bool ok = true;
  for (const int forced : {0, 1}) {
    const decode::Plan pl = decode::plan(p, decode::sm_count(), forced, chunk_multiple);
    decode::allocate_partials(p, pl, d);
    course::poison(d.out, p.q_elements() * sizeof(__nv_bfloat16));
    decode::launch(p, pl, d, cache);
    const std::vector<__nv_bfloat16> out_b = course::to_host(d.out, p.q_elements());
    char name[160];
    std::snprintf(name, sizeof(name), "paged decode b%d hq%d hkv%d d%d ctx%d page%d splits%d", p.batch, p.heads,
                  p.kv_heads, p.dim, p.lengths[0], pool.page_size, pl.splits);
    ok = decode::report_output(name, out_b, exact, rounded, p.dim, plant) && ok;
    if (plant != attn::Plant::kNone) break;

    // The same plan on the contiguous cache sums in the same order: the outputs must be identical.
    contiguous.part_acc = d.part_acc, contiguous.part_ml = d.part_ml;
    course::poison(contiguous.out, p.q_elements() * sizeof(__nv_bfloat16));
    decode::launch(p, pl, contiguous);
    const std::vector<__nv_bfloat16> same = course::to_host(contiguous.out, p.q_elements());
    size_t differ = 0;
    for (size_t e = 0; e < same.size(); ++e)
      differ += std::memcmp(&same[e], &out_b[e], sizeof(__nv_bfloat16)) != 0;
    std::snprintf(name, sizeof(name), "paged_equals_contiguous_splits%d", pl.splits);
    ok = course::check_true(name, differ == 0, same.size()) && ok;
  }
  course::device_free({contiguous.k, contiguous.v, contiguous.out, table});
  d.release();

  // The guards themselves (quietly here; main prints the error for its own problem).
  paged::Pool outside = pool;
  outside.table[0] = pool.num_pages;  // sequence 0's first page: one past the pool
  decode::Problem longer = p;
  longer.lengths[0] = pool.max_pages * pool.page_size + 1;
  const bool refused_outside = p.lengths[0] == 0 || !paged::table_valid(p, outside, true);
  ok = course::check_true("rejects_page_outside_pool", refused_outside, 1) && ok;
  ok = course::check_true("rejects_length_beyond_table", !paged::table_valid(longer, pool, true), 1) && ok;
  return ok;
}

// --8<-- [start:bench]
// The benchmark: Llama-3.2-1B's attention (32 query heads, 8 KV heads, dim 64), every sequence at the
// same context, the contiguous kernel and the paged one (pages dealt in random order, as a long-running
// server's pool ends up) at the same plan; bytes are the K and V cache read. The reference is a
// device-to-device copy moving the same bytes.
static void bench_case(int batch, int context, uint64_t seed) {
  decode::Problem p{batch, 32, 8, 64, context, std::vector<int>(batch, context)};
  const double cache_bytes = 2.0 * p.cache_elements() * sizeof(__nv_bfloat16);
  const double flops = 4.0 * p.batch * p.heads * static_cast<double>(context) * p.dim;
  char case_name[48];
  std::snprintf(case_name, sizeof(case_name), "b%d ctx%d", batch, context);

  decode::Buffers d = decode::random_device_buffers(p, seed);
  const decode::Plan contiguous_plan = decode::plan(p, decode::sm_count());
  decode::allocate_partials(p, contiguous_plan, d);
  const float contiguous_ms = course::time_kernel_ms([&] { decode::launch(p, contiguous_plan, d); });
  const float copy_ms = decode::time_copy_ms(d.v, d.k, p.cache_elements());
  course::print_bench(case_name, "contiguous split-KV (bf16)", contiguous_ms, cache_bytes, flops, true,
                      {{"batch", batch}, {"context", context}, {"chunks", contiguous_plan.splits}});
  course::print_bench(case_name, "cudaMemcpy (copy, same bytes)", copy_ms, cache_bytes, 0.0, true,
                      {{"batch", batch}, {"context", context}});

  // The pool holds exactly the batch's pages (the contiguous caches' memory, reused).
  for (const int page_size : {16, 64}) {
    const paged::Pool pool = paged::random_pool(p, page_size, context / page_size, 0, seed + page_size);
    int* table = course::to_device(pool.table);
    const paged::PagedCache cache{table, pool.max_pages, pool.page_shift()};
    const decode::Plan pl = decode::plan(p, decode::sm_count(), 0, std::max(decode::kChunkMultiple, page_size));
    decode::allocate_partials(p, pl, d);
    const float ms = course::time_kernel_ms([&] { decode::launch(p, pl, d, cache); });
    char impl[64];
    std::snprintf(impl, sizeof(impl), "paged split-KV, page %d (bf16)", page_size);
    course::print_bench(case_name, impl, ms, cache_bytes, flops, false,
                        {{"batch", batch}, {"context", context}, {"page_size", page_size}, {"chunks", pl.splits}});
    course::device_free({table});
  }
  d.release();
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  decode::Options o = decode::read_options(args);
  const int page_size = static_cast<int>(args.get_int("--page-size", 16, 1, 1 << 10));
  const int table_pages = static_cast<int>(args.get_int("--table-pages", 0, 0, 1 << 13));  // 0: enough, plus one
  args.finish();
  attn::Plant fault = attn::Plant::kNone;
  if (!course::parse_plant(o.plant, {attn::Plant::kZerosSmall, attn::Plant::kTile}, fault))
    return course::kExitFail;
  if (!paged::page_size_supported(page_size)) return course::kExitFail;
  decode::Problem& p = o.p;
  p.lengths = decode::edge_lengths(p.batch, o.context);
  // A table with one entry more than the longest sequence needs (never read), unless --table-pages says.
  const int max_pages = table_pages > 0 ? table_pages : course::ceil_div(o.context, page_size) + 1;
  p.capacity = max_pages * page_size;
  if (!decode::supported(p)) return course::kExitFail;
  const paged::Pool pool = paged::random_pool(p, page_size, max_pages, p.batch + 3, o.seed + 3);
  if (!paged::table_valid(p, pool)) return course::kExitFail;  // before any launch

  const bool ok = check(p, pool, o.seed, fault);
  if (ok && o.bench && fault == attn::Plant::kNone)
    for (const int batch : {1, 64})
      for (const int ctx : {4096, 32768}) bench_case(batch, ctx, o.seed);
  return ok ? 0 : course::kExitFail;
}
