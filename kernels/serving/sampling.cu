// sampling.cu: the last kernel of a decode step, choosing each sequence's next token from its logits.
// Logits are [batch][vocab] fp32 (vLLM's samplers take fp32 logits); one block of 1024 threads per row:
//   greedy_argmax  the index of the largest logit; ties go to the lowest index; a row that holds a NaN
//                  gives the index of its first NaN (as torch.argmax does); a row of -inf gives 0.
//   top_k_sample   top-k sampling at temperature T with the caller's u in [0, 1) per row: keep the k
//                  largest logits (ties at the threshold to the lower index, so exactly k are kept;
//                  NaN counts as -inf and -inf is never kept, so a row with fewer than k finite logits
//                  keeps only those), order them by descending logit (ties by lower index), weigh each
//                  by exp((x - max) / T) in fp32, and return the first whose running sum exceeds
//                  u * total. A row with nothing to keep gives 0, as greedy does for a row of -inf.
//                  The k-th largest logit is found by a radix select over the logits' bits (4 passes of
//                  8 bits, a shared-memory histogram each), then the kept logits are gathered, sorted
//                  (bitonic) and scanned in shared memory.
//
// Taught in docs/serving/sampling.md; its peer is sampling_torch.py (torch.argmax; torch.topk, softmax,
// cumsum and searchsorted: eager, CUDA graph, every torch.compile mode).
// Build: python -m course.toolchain build-all 1 kernels/serving/sampling.cu
// Run:   ./build/serving/sampling --batch 64 --vocab 32001 --k 50     (checks both kernels against float64)
//        ./build/serving/sampling --bench                             (also times them against a copy)
//
// course: gpu
// course: run --batch 18 --vocab 4099 --k 50 --seed 91
// course: run --batch 1 --vocab 1 --k 1 --seed 92
// course: run --batch 9 --vocab 7 --k 7 --seed 93
// course: run --batch 64 --vocab 32001 --k 50 --seed 94
// course: run --batch 64 --vocab 128256 --k 1024 --temperature 0.7 --seed 95
// course: run --batch 64 --vocab 151936 --k 1 --seed 96
// course: run --batch 1 --vocab 128256 --k 50 --seed 97
// course: run --batch 9 --vocab 262144 --k 1000 --temperature 1.5 --seed 98
// course: run --batch 64 --vocab 32001 --k 50 --seed 99 --plant argmax
// course: bench --bench
#include <algorithm>
#include <climits>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "../common/args.cuh"
#include "../common/check.cuh"
#include "../common/memory.cuh"
#include "../common/planted.cuh"
#include "../common/timing.cuh"
#include "../common/verify.cuh"

constexpr int kThreads = 1024;  // one block per row: at batch 1, as many loads in flight as a block holds
constexpr int kWarps = kThreads / 32;
constexpr int kMaxK = kThreads;  // one kept logit per thread in the sort and the scan
constexpr int kMaxVocab = 1 << 18;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kDraws = 8;  // u vectors drawn per checked run

// --8<-- [start:key]
// An order-preserving map from fp32 to uint32: a < b as floats exactly when key(a) < key(b) as integers.
// Positive floats already order by their bits, so set the sign bit to put them above the negatives;
// negative floats order backwards, so flip all their bits. -0 becomes +0 first: equal logits, equal keys.
__device__ __forceinline__ uint32_t ordered_key(float x) {
  const uint32_t bits = __float_as_uint(x == 0.0f ? 0.0f : x);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}
__device__ __forceinline__ float key_logit(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7FFFFFFFu : ~key);
}
constexpr uint32_t kNegInfKey = 0x007FFFFFu;  // ordered_key(-inf): keys at or below it are never kept
// --8<-- [end:key]

// Calls f(i, x, valid) for every logit x = row[i] of a row, each once across the block, in loops whose trip
// counts are the same for every thread (so warp-wide intrinsics in f see all 32 lanes); valid is false
// for the padding calls. 16-byte loads between a scalar head (up to the first 16-byte boundary: a row of
// an odd vocab starts anywhere) and a scalar tail.
template <typename F>
__device__ __forceinline__ void for_each_logit(const float* __restrict__ row, int vocab, F&& f) {
  const int misaligned = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15) / 4;
  const int head = min(vocab, (4 - misaligned) & 3);
  const int vectors = (vocab - head) / 4;
  const int tail_start = head + 4 * vectors;
  const int t = threadIdx.x;
  f(t, t < head ? row[t] : 0.0f, t < head);
  const float4* v = reinterpret_cast<const float4*>(row + head);
#pragma unroll 4
  for (int base = 0; base < vectors; base += kThreads) {
    const int j = base + t;
    const bool valid = j < vectors;
    const float4 q = valid ? v[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const int i = head + 4 * j;
    f(i, q.x, valid), f(i + 1, q.y, valid), f(i + 2, q.z, valid), f(i + 3, q.w, valid);
  }
  f(tail_start + t, tail_start + t < vocab ? row[tail_start + t] : 0.0f, tail_start + t < vocab);
}

// --8<-- [start:greedy]
// Greedy: the largest (key, -index) pair, packed into one 64-bit integer so that a plain max keeps the
// largest logit and, among equal ones, the lowest index. NaN gets the largest key, so the first NaN wins.
__device__ __forceinline__ unsigned long long greedy_rank(int i, float x) {
  const uint32_t key = isnan(x) ? 0xFFFFFFFFu : ordered_key(x);
  return (static_cast<unsigned long long>(key) << 32) | (0xFFFFFFFFu - static_cast<uint32_t>(i));
}

__global__ void __launch_bounds__(kThreads) greedy_argmax(const float* __restrict__ logits, int vocab,
                                                          int* __restrict__ token) {
  __shared__ unsigned long long warp_best[kWarps];
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  unsigned long long best = 0;  // below every logit's rank: a row of -inf still gives index 0
  for_each_logit(row, vocab, [&](int i, float x, bool valid) {
    if (valid) best = max(best, greedy_rank(i, x));
  });
  for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
  if (threadIdx.x % 32 == 0) warp_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = warp_best[threadIdx.x];
    for (int offset = 16; offset > 0; offset /= 2) best = max(best, __shfl_xor_sync(kFullMask, best, offset));
    if (threadIdx.x == 0) token[blockIdx.x] = static_cast<int>(0xFFFFFFFFu - static_cast<uint32_t>(best));
  }
}
// --8<-- [end:greedy]

// A logit's key for top-k: NaN counts as -inf, so it is never kept.
__device__ __forceinline__ uint32_t topk_key(float x) { return isnan(x) ? kNegInfKey : ordered_key(x); }

// --8<-- [start:select]
// Radix select: the key of the k-th largest logit. Each pass histograms the next 8 bits of the keys that
// match the bits chosen so far, then warp 0 finds the digit where the count from the top reaches the
// number still to find. After 4 passes `threshold` is the k-th largest key, `ties_kept` how many logits
// equal to it are kept and `ties_total` how many there are. With k or fewer keepable logits, every
// logit above -inf is kept (threshold = kNegInfKey, no ties).
struct Selection {
  uint32_t threshold;
  int ties_kept, ties_total;
};

__device__ Selection radix_select(const float* __restrict__ row, int vocab, int k) {
  __shared__ unsigned hist[256];
  __shared__ Selection chosen;
  __shared__ bool all_kept;
  uint32_t prefix = 0;  // the key's bits chosen so far (above the current digit)
  int remaining = k;    // how many of the kept logits are among the keys that match prefix
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    const uint32_t high_mask = pass == 0 ? 0u : 0xFFFFFFFFu << (shift + 8);
    for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
    __syncthreads();
    for_each_logit(row, vocab, [&](int, float x, bool valid) {
      const uint32_t key = topk_key(x);
      const bool counts = valid && key > kNegInfKey && (key & high_mask) == prefix;
      const unsigned counting = __ballot_sync(kFullMask, counts);  // after pass 0, few lanes count
      if (counts) {  // the counting lanes group by digit, and each group adds its size once
        const unsigned digit = (key >> shift) & 0xFF;
        const unsigned peers = __match_any_sync(counting, digit);
        if (threadIdx.x % 32 == __ffs(peers) - 1) atomicAdd(&hist[digit], __popc(peers));
      }
    });
    __syncthreads();
    if (threadIdx.x < 32) {  // lane l holds digits 255 - 8l down to 248 - 8l: the top digits first
      const int lane = threadIdx.x;
      unsigned mine = 0;
      for (int j = 0; j < 8; ++j) mine += hist[255 - 8 * lane - j];
      unsigned above = mine;  // inclusive scan from lane 0: the count at and above this lane's digits
      for (int offset = 1; offset < 32; offset *= 2) {
        const unsigned from = __shfl_up_sync(kFullMask, above, offset);
        if (lane >= offset) above += from;
      }
      const unsigned keepable = __shfl_sync(kFullMask, above, 31);
      if (pass == 0 && keepable <= static_cast<unsigned>(k)) {
        if (lane == 0) all_kept = true, chosen = {kNegInfKey, 0, 0};
      } else {
        if (lane == 0) all_kept = false;
        const int owner = __ffs(__ballot_sync(kFullMask, above >= static_cast<unsigned>(remaining))) - 1;
        if (lane == owner) {
          unsigned count = above - mine;  // keys above this lane's digits
          for (int j = 0; j < 8; ++j) {
            const int d = 255 - 8 * lane - j;
            if (count + hist[d] >= static_cast<unsigned>(remaining)) {
              chosen = {prefix | (static_cast<uint32_t>(d) << shift), remaining - static_cast<int>(count),
                        static_cast<int>(hist[d])};
              break;
            }
            count += hist[d];
          }
        }
      }
    }
    __syncthreads();
    if (all_kept) return chosen;
    prefix = chosen.threshold;
    remaining = chosen.ties_kept;
  }
  return chosen;
}
// --8<-- [end:select]

// --8<-- [start:gather]
// The kept logits go into shared memory as (key << 32 | ~index): a descending sort of these integers
// orders by descending logit and, among equal logits, by ascending index. When every logit equal to the
// threshold is kept, order does not matter and each thread appends what it finds. Otherwise only the
// first ties_kept of them by index are, so the row is walked in order, kThreads logits at a time, each
// tie's rank among the ties counted with a ballot.
__device__ int gather_kept(const float* __restrict__ row, int vocab, Selection s, unsigned long long* kept) {
  __shared__ int count;
  __shared__ int warp_ties[kWarps];
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  const auto append = [&](int i, uint32_t key) {
    kept[atomicAdd(&count, 1)] = (static_cast<unsigned long long>(key) << 32) | ~static_cast<uint32_t>(i);
  };
  if (s.ties_kept == s.ties_total) {
    for_each_logit(row, vocab, [&](int i, float x, bool valid) {
      const uint32_t key = topk_key(x);
      if (valid && (key > s.threshold || (key == s.threshold && s.ties_kept > 0))) append(i, key);
    });
  } else {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    int ties_before_chunk = 0;
    for (int base = 0; base < vocab; base += kThreads) {
      const int i = base + threadIdx.x;
      const uint32_t key = i < vocab ? topk_key(row[i]) : 0u;
      const unsigned ties = __ballot_sync(kFullMask, key == s.threshold);
      if (lane == 0) warp_ties[warp] = __popc(ties);
      __syncthreads();
      int rank = ties_before_chunk + __popc(ties & ((1u << lane) - 1)), chunk_ties = 0;
      for (int w = 0; w < kWarps; ++w) rank += w < warp ? warp_ties[w] : 0, chunk_ties += warp_ties[w];
      if (key > s.threshold || (key == s.threshold && rank < s.ties_kept)) append(i, key);
      ties_before_chunk += chunk_ties;
      __syncthreads();  // warp_ties is rewritten by the next chunk
    }
  }
  __syncthreads();
  return count;
}
// --8<-- [end:gather]

// --8<-- [start:sample]
// Sort the kept logits (bitonic, descending, padded to a power of two with zeros, which sort last),
// weigh them, scan the weights and pick the first whose running sum exceeds u * total. fp32 sums need
// not be monotone to the last bit, so "first" is the smallest such position (atomicMin); if rounding
// leaves none (u * total == total), the last kept logit with a positive weight is taken.
__global__ void __launch_bounds__(kThreads)
    top_k_sample(const float* __restrict__ logits, int vocab, int k, float temperature, const float* __restrict__ u,
                 int* __restrict__ token, int* __restrict__ kept_tokens) {
  __shared__ unsigned long long kept[kMaxK];
  __shared__ float warp_sums[kWarps];
  __shared__ int first_above, last_positive;
  const float* row = logits + static_cast<size_t>(blockIdx.x) * vocab;
  const Selection s = radix_select(row, vocab, k);
  const int count = gather_kept(row, vocab, s, kept);

  int size = 1;
  while (size < count) size *= 2;
  const int t = threadIdx.x;
  if (t >= count && t < size) kept[t] = 0;
  if (t == 0) first_above = INT_MAX, last_positive = -1;
  for (int span = 2; span <= size; span *= 2) {
    for (int stride = span / 2; stride > 0; stride /= 2) {
      __syncthreads();
      const int partner = t ^ stride;
      if (t < size && partner > t) {
        const unsigned long long a = kept[t], b = kept[partner];
        if ((a < b) == ((t & span) == 0)) kept[t] = b, kept[partner] = a;  // descending where t & span is 0
      }
    }
  }
  __syncthreads();

  float weight = 0.0f;
  if (t < count) {
    const float top = key_logit(static_cast<uint32_t>(kept[0] >> 32));
    const float x = key_logit(static_cast<uint32_t>(kept[t] >> 32));
    weight = x == top ? 1.0f : expf((x - top) / temperature);  // x == top also covers top = +inf
  }
  float running = weight;  // inclusive scan: within the warp, then the warps' totals
  const int lane = t % 32, warp = t / 32;
  for (int offset = 1; offset < 32; offset *= 2) {
    const float from = __shfl_up_sync(kFullMask, running, offset);
    if (lane >= offset) running += from;
  }
  if (lane == 31) warp_sums[warp] = running;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < kWarps; ++w) running += w < warp ? warp_sums[w] : 0.0f, total += warp_sums[w];
  const float threshold = u[blockIdx.x] * total;
  if (t < count && running > threshold) atomicMin(&first_above, t);
  if (t < count && weight > 0.0f) atomicMax(&last_positive, t);
  __syncthreads();
  if (t == 0) {
    const int pick = first_above != INT_MAX ? first_above : last_positive;
    token[blockIdx.x] = pick < 0 ? 0 : static_cast<int>(~static_cast<uint32_t>(kept[pick]));
  }
  if (kept_tokens != nullptr && t < k) {  // the debug path: the kept tokens in order, -1 past the count
    const int kept_token = t < count ? static_cast<int>(~static_cast<uint32_t>(kept[t])) : -1;
    kept_tokens[static_cast<size_t>(blockIdx.x) * k + t] = kept_token;
  }
}
// --8<-- [end:sample]

static void launch_greedy(const float* logits, int batch, int vocab, int* token) {
  greedy_argmax<<<batch, kThreads>>>(logits, vocab, token);
  CUDA_CHECK_LAUNCH();
}

static void launch_top_k(const float* logits, int batch, int vocab, int k, float temperature, const float* u,
                         int* token, int* kept_tokens = nullptr) {
  top_k_sample<<<batch, kThreads>>>(logits, vocab, k, temperature, u, token, kept_tokens);
  CUDA_CHECK_LAUNCH();
}

// --8<-- [start:reference]
// float64 references. Greedy: the first NaN, else the largest logit, the lowest index among equals.
static int reference_greedy(const float* row, int vocab) {
  int best = 0;
  for (int i = 0; i < vocab; ++i) {
    if (std::isnan(row[i])) return i;
    if (row[i] > row[best]) best = i;
  }
  return best;
}

struct Candidate {
  double logit;
  int index;
};

// Top-k: the logits above -inf (NaN excluded), sorted by descending logit and ascending index, first k.
static std::vector<Candidate> reference_kept(const float* row, int vocab, int k) {
  std::vector<Candidate> c;
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(row[i]) && row[i] > -INFINITY) c.push_back({row[i], i});
  const size_t kept = std::min(c.size(), static_cast<size_t>(k));
  std::partial_sort(c.begin(), c.begin() + kept, c.end(), [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.index < b.index);
  });
  c.resize(kept);
  return c;
}

// The draw for u, and its margin: the distance from u * total to the nearest boundary of the running
// sum, relative to the total. A draw within rounding of a boundary may go either way in fp32.
struct Draw {
  int token;
  double margin;
};

static Draw reference_draw(const std::vector<Candidate>& kept, double temperature, double u) {
  if (kept.empty()) return {0, 1.0};
  const double top = kept[0].logit;
  std::vector<double> running(kept.size());
  double sum = 0.0;
  for (size_t i = 0; i < kept.size(); ++i)
    running[i] = sum += kept[i].logit == top ? 1.0 : std::exp((kept[i].logit - top) / temperature);
  const double threshold = u * sum;
  Draw draw{-1, INFINITY};
  for (size_t i = 0; i < kept.size(); ++i) {
    if (draw.token < 0 && running[i] > threshold) draw.token = kept[i].index;
    draw.margin = std::min(draw.margin, std::fabs(running[i] - threshold) / sum);
  }
  return draw;
}
// --8<-- [end:reference]

// The rows of a checked run, by row % 9 (row 0 is always the plain one): 0 logits of 4 N(0, 1); 1 the
// same rounded to halves (many ties, -0 beside +0); 2 all -inf but k / 2 of them (fewer than k finite);
// 3 all -inf; 4 NaN every 97th (some negative NaN); 5 all equal; 6 two +inf among normal logits;
// 7 huge logits up to +-3e38; 8 all NaN.
static std::vector<float> make_logits(int batch, int vocab, int k, uint64_t seed) {
  std::vector<float> logits(static_cast<size_t>(batch) * vocab);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_real_distribution<float> huge(-3e38f, 3e38f);
  for (int r = 0; r < batch; ++r) {
    float* row = logits.data() + static_cast<size_t>(r) * vocab;
    const int kind = r % 9;
    for (int i = 0; i < vocab; ++i) row[i] = normal(rng);
    if (kind == 1)
      for (int i = 0; i < vocab; ++i) row[i] = std::round(2.0f * row[i]) / 2.0f;
    if (kind == 2 || kind == 3) {
      const int finite = kind == 2 ? std::min(vocab, k / 2) : 0;
      std::vector<float> keep(row, row + vocab);
      std::fill(row, row + vocab, -INFINITY);
      for (int j = 0; j < finite; ++j) row[j * (vocab / finite)] = keep[j];
    }
    if (kind == 4) {
      for (int i = 13 % vocab; i < vocab; i += 97) row[i] = (i / 97) % 2 ? -NAN : NAN;
      row[vocab / 2] = NAN;
    }
    if (kind == 5) std::fill(row, row + vocab, 1.5f);
    if (kind == 6) row[vocab / 3] = row[2 * (vocab / 3)] = INFINITY;
    if (kind == 7)
      for (int i = 0; i < vocab; ++i) row[i] = huge(rng);
    if (kind == 8) std::fill(row, row + vocab, NAN);
  }
  return logits;
}

struct Case {
  int batch, vocab, k;
  double temperature;
};

static std::string case_name(const char* what, const Case& c) {
  char name[96];
  std::snprintf(name, sizeof(name), "%s_b%d_v%d_k%d", what, c.batch, c.vocab, c.k);
  return name;
}

// Compares the chosen tokens with the reference's, skipping draws within 1e-5 of a boundary.
static bool check_draws(const char* name, const std::vector<int>& got, const std::vector<Draw>& want) {
  size_t compared = 0, skipped = 0, first_bad = SIZE_MAX;
  for (size_t j = 0; j < got.size(); ++j) {
    if (want[j].margin < 1e-5) {
      ++skipped;
      continue;
    }
    ++compared;
    if (got[j] != want[j].token && first_bad == SIZE_MAX) first_bad = j;
  }
  char detail[160];
  if (first_bad != SIZE_MAX)
    std::snprintf(detail, sizeof(detail), "first_bad=%zu got=%d want=%d skipped=%zu", first_bad, got[first_bad],
                  want[first_bad].token, skipped);
  else
    std::snprintf(detail, sizeof(detail), "skipped=%zu (u within 1e-5 of a boundary of the running sum)", skipped);
  return course::check_true(name, first_bad == SIZE_MAX, compared, detail);
}

// Both kernels on the rows of make_logits, outputs poisoned first (-1 in every int). Greedy and the kept
// lists (the debug path, first draw) must equal the reference exactly; each of kDraws draws of u per row
// must pick the reference's token unless u is within 1e-5 of a boundary. k = 1 must equal greedy where
// the row has no NaN. --plant argmax: greedy's tokens in place of the draws must be rejected.
static bool check(const Case& c, uint64_t seed, bool plant) {
  const size_t rows = static_cast<size_t>(c.batch);
  const std::vector<float> logits = make_logits(c.batch, c.vocab, c.k, seed);
  float* d_logits = course::to_device(logits);
  int* d_token = course::device_alloc<int>(rows);
  int* d_kept = course::device_alloc<int>(rows * c.k);
  float* d_u = course::device_alloc<float>(rows);

  course::poison(d_token, rows * sizeof(int));
  launch_greedy(d_logits, c.batch, c.vocab, d_token);
  const std::vector<int> greedy = course::to_host(d_token, rows);
  size_t greedy_bad = SIZE_MAX;
  for (size_t r = 0; r < rows && greedy_bad == SIZE_MAX; ++r)
    if (greedy[r] != reference_greedy(logits.data() + r * c.vocab, c.vocab)) greedy_bad = r;
  char detail[128] = "(ties to the lowest index, the first NaN, 0 for a row of -inf)";
  if (greedy_bad != SIZE_MAX)
    std::snprintf(detail, sizeof(detail), "first_bad_row=%zu got=%d want=%d", greedy_bad, greedy[greedy_bad],
                  reference_greedy(logits.data() + greedy_bad * c.vocab, c.vocab));
  bool ok = course::check_true(case_name("greedy", c).c_str(), greedy_bad == SIZE_MAX, rows, detail);

  std::vector<std::vector<Candidate>> want_kept(rows);
  for (size_t r = 0; r < rows; ++r) want_kept[r] = reference_kept(logits.data() + r * c.vocab, c.vocab, c.k);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<int> got, planted;
  std::vector<Draw> want;
  for (int d = 0; d < kDraws; ++d) {
    std::vector<float> u(rows);
    for (float& x : u) x = uniform(rng);
    if (d == 0) u[0] = 0.0f;  // the smallest u: the first kept token
    CUDA_CHECK(cudaMemcpy(d_u, u.data(), rows * sizeof(float), cudaMemcpyHostToDevice));
    course::poison(d_token, rows * sizeof(int));
    if (d == 0) course::poison(d_kept, rows * c.k * sizeof(int));
    launch_top_k(d_logits, c.batch, c.vocab, c.k, static_cast<float>(c.temperature), d_u, d_token,
                 d == 0 ? d_kept : nullptr);
    const std::vector<int> tokens = course::to_host(d_token, rows);
    for (size_t r = 0; r < rows; ++r) {
      got.push_back(tokens[r]);
      planted.push_back(greedy[r]);
      want.push_back(reference_draw(want_kept[r], c.temperature, u[r]));
    }
    if (d == 0) {
      const std::vector<int> kept = course::to_host(d_kept, rows * c.k);
      size_t bad = SIZE_MAX;
      for (size_t r = 0; r < rows && bad == SIZE_MAX; ++r)
        for (int j = 0; j < c.k && bad == SIZE_MAX; ++j) {
          const int expect = j < static_cast<int>(want_kept[r].size()) ? want_kept[r][j].index : -1;
          if (kept[r * c.k + j] != expect) bad = r * c.k + j;
        }
      char kept_detail[128] = "(the kept tokens, in order, -1 past the count)";
      if (bad != SIZE_MAX)
        std::snprintf(kept_detail, sizeof(kept_detail), "first_bad_row=%zu slot=%zu", bad / c.k, bad % c.k);
      ok = course::check_true(case_name("top_k_kept", c).c_str(), bad == SIZE_MAX, rows * c.k, kept_detail) && ok;
    }
  }
  ok = check_draws(case_name("top_k_draws", c).c_str(), got, want) && ok;
  if (c.k == 1) {
    size_t compared = 0, bad = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * c.vocab;
      if (std::any_of(row, row + c.vocab, [](float x) { return std::isnan(x); })) continue;
      ++compared;
      for (int d = 0; d < kDraws; ++d) bad += got[d * rows + r] != greedy[r];
    }
    ok = course::check_true(case_name("top_1_is_greedy", c).c_str(), bad == 0, compared,
                            "(rows without NaN, every draw)") && ok;
  }
  if (plant) {
    const bool passed = course::verdict_quietly([&] { return check_draws("planted", planted, want); });
    ok = course::check_true("planted_argmax_caught", !passed, planted.size(),
                            "(greedy's tokens in place of the draws must fail the draw check)") && ok;
  }
  course::device_free({d_logits, d_token, d_kept, d_u});
  return ok;
}

// --8<-- [start:bench]
// Bytes: the logits read once (4 vocab bytes a row) and a token written; both kernels need no more. The
// top-k kernel reads each row five times, but four of them from L2 (a row is 0.5 MB). The copy reference copies
// half of the logits' bytes into a scratch buffer: the same bytes read and written.
static void bench_case(int batch, int vocab, int k) {
  const size_t n = static_cast<size_t>(batch) * vocab;
  std::vector<float> logits(n);
  std::mt19937_64 rng(2026);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (float& x : logits) x = normal(rng);
  std::vector<float> u(static_cast<size_t>(batch), 0.5f);
  float* d_logits = course::to_device(logits);
  float* d_u = course::to_device(u);
  int* d_token = course::device_alloc<int>(static_cast<size_t>(batch));
  char* d_scratch = course::device_alloc<char>(n * sizeof(float) / 2);
  const double bytes = n * sizeof(float) + batch * sizeof(int);
  const float greedy_ms = course::time_kernel_ms([&] { launch_greedy(d_logits, batch, vocab, d_token); });
  const float top_k_ms =
      course::time_kernel_ms([&] { launch_top_k(d_logits, batch, vocab, k, 1.0f, d_u, d_token); });
  const float copy_ms = course::time_kernel_ms([&] {
    CUDA_CHECK(cudaMemcpy(d_scratch, d_logits, n * sizeof(float) / 2, cudaMemcpyDeviceToDevice));
  });
  char greedy_case[48], top_k_case[48];
  std::snprintf(greedy_case, sizeof(greedy_case), "greedy b%d v%d", batch, vocab);
  std::snprintf(top_k_case, sizeof(top_k_case), "top%d b%d v%d", k, batch, vocab);
  course::print_bench(greedy_case, "greedy_argmax (fp32)", greedy_ms, bytes, 0.0, false, {{"batch", batch}});
  course::print_bench(greedy_case, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * (n * sizeof(float) / 2), 0.0, true,
                      {{"batch", batch}});
  course::print_bench(top_k_case, "top_k_sample (fp32)", top_k_ms, bytes, 0.0, false, {{"batch", batch}, {"k", k}});
  course::print_bench(top_k_case, "cudaMemcpy (copy, same bytes)", copy_ms, 2.0 * (n * sizeof(float) / 2), 0.0, true,
                      {{"batch", batch}, {"k", k}});
  course::device_free({d_logits, d_u, d_token, d_scratch});
}
// --8<-- [end:bench]

int main(int argc, char** argv) {
  const course::Args args{argc, argv};
  Case c{};
  c.batch = static_cast<int>(args.get_int("--batch", 64, 1, 65535));
  c.vocab = static_cast<int>(args.get_int("--vocab", 32001, 1, kMaxVocab));
  c.k = static_cast<int>(args.get_int("--k", 50, 1, kMaxK));
  c.temperature = args.get_double("--temperature", 1.0);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 2026, 0));
  const bool bench = args.has("--bench");
  const std::string plant_text = args.get_str("--plant", "");
  args.finish();
  course::Plant plant;
  if (!course::parse_plant(plant_text, {course::Plant::kArgmax}, plant)) return course::kExitFail;
  if (c.k > c.vocab) {
    std::fprintf(stderr, "error: --k must be at most --vocab (%d), got %d\n", c.vocab, c.k);
    return course::kExitFail;
  }
  if (!(c.temperature > 0.0)) {
    std::fprintf(stderr, "error: --temperature must be above 0, got %g (T = 0 is greedy: use greedy_argmax)\n",
                 c.temperature);
    return course::kExitFail;
  }
  if (static_cast<double>(c.batch) * c.vocab > (1 << 26)) {
    std::fprintf(stderr, "error: --batch x --vocab must be at most 2^26 logits\n");
    return course::kExitFail;
  }
  const bool ok = check(c, seed, plant == course::Plant::kArgmax);
  if (ok && bench && plant == course::Plant::kNone)
    for (const int batch : {1, 64}) bench_case(batch, 128256, 50);
  return ok ? 0 : course::kExitFail;
}
